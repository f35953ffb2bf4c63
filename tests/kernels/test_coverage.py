"""docs/nki.md's coverage table says the truth, in both directions: every name marked implemented
exists and is not a refusal; every name marked refused fails with NkiUnsupportedError (MX dtypes:
NkiTypeError) naming itself when a kernel uses it; the counts in the text match the table."""

import pathlib
import re

import pytest
import torch

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl
import nki.lnc as lnc
from torchneuron.kernels.nki import NkiUnsupportedError
from torchneuron.kernels.nki.dtypes import as_nki_dtype
from torchneuron.kernels.nki.errors import NkiTypeError

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "nki.md"
MODULES = {"nl": nl, "nisa": nisa, "ncc": ncc, "nki.lnc": lnc}
ROW = re.compile(r"^\| `(nl|nisa|ncc|nki\.lnc)\.(\w+)` \| (implemented|refused) \|")


def rows():
    found = [m.groups() for line in DOC.read_text().splitlines() if (m := ROW.match(line))]
    assert len(found) > 150, "the coverage table went missing from docs/nki.md"
    return found


def ids(params):
    return [f"{p}.{n}" for p, n, _ in params]


IMPLEMENTED = [r for r in rows() if r[2] == "implemented"]
REFUSED = [r for r in rows() if r[2] == "refused"]


def test_counts_in_the_text_match_the_table():
    text = DOC.read_text()
    assert f"{len(IMPLEMENTED)} implemented and {len(REFUSED)} refused" in text


@pytest.mark.parametrize("prefix,name,status", IMPLEMENTED, ids=ids(IMPLEMENTED))
def test_implemented_names_exist(prefix, name, status):
    value = getattr(MODULES[prefix], name)
    assert "_unsupported" not in getattr(value, "__qualname__", ""), f"{prefix}.{name} refuses"
    if isinstance(value, str):  # a dtype name kept as a refusal would be a str
        pytest.fail(f"{prefix}.{name} is a placeholder string")


@pytest.mark.parametrize("prefix,name,status", REFUSED, ids=ids(REFUSED))
def test_refused_names_fail_clearly(prefix, name, status):
    value = getattr(MODULES[prefix], name)
    if isinstance(value, str):  # an MX dtype
        with pytest.raises(NkiTypeError, match=name):
            as_nki_dtype(value)
        return

    @nki.jit
    def k(x):
        if callable(value):
            value(x)
        else:
            value[0:4]

    with pytest.raises(NkiUnsupportedError, match=name):
        k(torch.zeros(4, 4))
