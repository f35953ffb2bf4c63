"""The default suite's slice of the timm battery (torchneuron/compat/vision/timm_models.py):
three families, forward, backward, channels_last and bf16 autocast on neuron against the CPU.
timm installs in .venv-214 only; elsewhere these tests are skipped, saying so. Slow: 5 minutes
on the shared 2-core machine (`make test-slow` in .venv-214)."""

import pytest

pytest.importorskip("timm")

# Choosing each family's smallest configuration builds about 400 models on meta: minutes.
pytestmark = pytest.mark.slow

from torchneuron.compat.staged import NA, PASS, quiet, run_case, select  # noqa: E402
from torchneuron.compat.vision import timm_models  # noqa: E402


@pytest.fixture(scope="module")
def all_cases():
    return timm_models.cases()  # builds each family's candidates on meta: once per module


def test_resnet_convnext_and_vit_match_cpu_in_every_stage(all_cases):
    quiet()
    cases = select(all_cases, ["resnet: *", "convnext: *", "vision_transformer: *"])
    assert len(cases) == 3
    for case in cases:
        rec = run_case(case, timm_models.STAGES)
        assert all(rec[s] == PASS for s in timm_models.STAGES), f"{case.name}: {rec['cause']}"


def test_one_case_per_timm_family_with_its_smallest_configuration(all_cases):
    import timm

    assert {c.family for c in all_cases} == {f"timm:{m}" for m in timm.list_modules()}
    assert timm_models.smallest("resnet") == "test_resnet"
    assert timm_models._rank("resnet18") < timm_models._rank("resnet152")
