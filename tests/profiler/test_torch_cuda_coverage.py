"""docs/torch-cuda-coverage.md lists every name of torch.cuda.__all__ once, and its status is
what torch.neuron does: mirrored names exist, refused names raise NotImplementedError, names
marked not applicable are absent. A name newer than PyTorch 2.13 says since which version
("(torch 2.14)" opening its note): the rows of the installed version's names equal its
torch.cuda.__all__."""

import pathlib
import re

import pytest
import torch

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "torch-cuda-coverage.md"
ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (mirrored|refused|not applicable) \| (.*) \|$")
SINCE = re.compile(r"^\(torch (\d+)\.(\d+)\)")
FIRST_VERSION = (2, 13)  # the table's names without a mark are torch.cuda's in 2.13


def rows():
    return {m.group(1): (m.group(3), m.group(4)) for line in DOC.read_text().splitlines()
            if (m := ROW.match(line))}


def since(note: str) -> tuple[int, int]:
    m = SINCE.match(note)
    return (int(m.group(1)), int(m.group(2))) if m else FIRST_VERSION


def test_every_torch_cuda_name_has_one_row():
    names = [m.group(1) for line in DOC.read_text().splitlines() if (m := ROW.match(line))]
    assert len(names) == len(set(names))
    installed = tuple(int(p) for p in torch.__version__.split(".")[:2])
    assert {n for n, (_, note) in rows().items() if since(note) <= installed} == set(torch.cuda.__all__)


def test_a_version_mark_is_read():
    assert since("(torch 2.14) a hook") == (2, 14)
    assert since("legacy typed class") == FIRST_VERSION


def test_counts_in_the_text_match_the_rows():
    statuses = [s for s, _ in rows().values()]
    counts = {s: statuses.count(s) for s in ("mirrored", "refused", "not applicable")}
    assert (f"Counts: {counts['mirrored']} mirrored, {counts['refused']} refused, "
            f"{counts['not applicable']} not applicable.") in DOC.read_text()


@pytest.mark.parametrize("name", sorted(torch.cuda.__all__))
def test_status_matches_the_code(name):
    status, note = rows()[name]
    if status == "not applicable":
        assert not hasattr(torch.neuron, name)
        assert note
    elif status == "refused":
        with pytest.raises(NotImplementedError):
            getattr(torch.neuron, name)()
    else:
        assert hasattr(torch.neuron, name)
