"""The process world the distributed tests run their bodies in: one per test module, of
`WORLD_SIZE` ranks (a module-level constant; 2 when the module sets none)."""

import pytest
from dist_world import World


@pytest.fixture(scope="module")
def world(request):
    with World(getattr(request.module, "WORLD_SIZE", 2)) as w:
        yield w
