"""docs/torch-cuda-coverage.md lists every name of torch.cuda.__all__ once, and its status is
what torch.neuron does: mirrored names exist, refused names raise NotImplementedError, names
marked not applicable are absent."""

import pathlib
import re

import pytest
import torch

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "torch-cuda-coverage.md"
ROW = re.compile(r"^\| `([^`]+)` \| (.*?) \| (mirrored|refused|not applicable) \| (.*) \|$")


def rows():
    return {m.group(1): (m.group(3), m.group(4)) for line in DOC.read_text().splitlines()
            if (m := ROW.match(line))}


def test_every_torch_cuda_name_has_one_row():
    names = [m.group(1) for line in DOC.read_text().splitlines() if (m := ROW.match(line))]
    assert len(names) == len(set(names))
    assert set(names) == set(torch.cuda.__all__)


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
