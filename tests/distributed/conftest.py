"""The process world the distributed tests run their bodies in: one per test module, of
`WORLD_SIZE` ranks (a module-level constant; 2 when the module sets none)."""

import os
import tempfile

import pytest
from dist_world import World

# Ranks dump PyTorch's flight recorder on a desync or a timeout (torchneuron/distributed/
# forensics.py); the tests' dumps go to a folder of their own, not to PyTorch's default in /tmp.
_dumps = tempfile.TemporaryDirectory(prefix="neuron-fr-")  # removed at exit
os.environ.setdefault("TORCH_FR_DUMP_TEMP_FILE", os.path.join(_dumps.name, "trace_"))


@pytest.fixture(scope="module")
def world(request):
    with World(getattr(request.module, "WORLD_SIZE", 2)) as w:
        yield w
