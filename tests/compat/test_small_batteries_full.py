"""The whole diffusers, PEFT and sentence-transformers batteries (slow suite): every case that the
CPU runs passes every stage on neuron."""

import pytest

pytest.importorskip("diffusers")
pytest.importorskip("peft")

from torchneuron.compat.staged import CPU_FAIL, NA, PASS, quiet, run_case  # noqa: E402

pytestmark = pytest.mark.slow


def _battery(module):
    import importlib

    command = importlib.import_module(f"torchneuron.compat.{module}.command")
    cases = command.cases() if hasattr(command, "cases") else importlib.import_module(
        f"torchneuron.compat.{module}.cases").cases()
    return cases, command.STAGES


@pytest.mark.parametrize("module", ["diffusion", "adapters", "sentences"])
def test_every_case_the_cpu_runs_passes_on_neuron(module):
    quiet()
    cases, stages = _battery(module)
    failures = []
    for case in cases:
        rec = run_case(case, stages)
        if any(rec[s] == CPU_FAIL for s in stages):
            continue
        if not all(rec[s] in (PASS, NA) for s in stages):
            failures.append(f"{case.name}: {rec['cause']}")
    assert not failures, "\n".join(failures)
