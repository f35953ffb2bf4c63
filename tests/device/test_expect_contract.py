"""torch.neuron.expect, @pytest.mark.neuron_expect and NEURON_EXPECT (device/contract.py,
device/contract_pytest.py): a block within its bounds passes, one over them raises
ExpectationError naming each violation, its op and the line; bad bounds are refused by name."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.device import accounting


def test_a_clean_block_passes():
    x = torch.randn(8, device="neuron")
    y = torch.randn(8, device="neuron")
    with accounting.measure():
        (x + y) * 2  # warm: the block below repeats signatures the accounting has seen
    with torch.neuron.expect(host_fallbacks=0, syncs=0, recompiles=0, signatures=0,
                             dynamic_shapes=0, peak_memory="1GiB") as block:
        z = (x + y) * 2
    torch.testing.assert_close(z.cpu(), (x.cpu() + y.cpu()) * 2)
    assert block.summary["syncs"]["count"] == 0


def test_violations_name_the_op_the_cause_and_the_line():
    x = torch.arange(4.0, device="neuron")
    with pytest.raises(torch.neuron.ExpectationError) as info:
        with torch.neuron.expect(syncs=0, host_fallbacks=0):
            x.sum().item()  # the-item
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x.double() * 2  # the-float64
    message = str(info.value)
    assert isinstance(info.value, AssertionError)
    assert "2 expectation(s) not met" in message
    assert "syncs: 1 > 0" in message and "item (aten::_local_scalar_dense)" in message
    assert "host_fallbacks: " in message and "aten::mul.Tensor (float64)" in message
    source = open(__file__).read().splitlines()
    item_line = next(i for i, t in enumerate(source, 1) if t.endswith("# the-item"))
    assert f"test_expect_contract.py:{item_line}" in message


def test_recompiles_and_peak_memory_violations():
    accounting.reset_readiness()
    w = torch.randn(4, 4, device="neuron")
    with pytest.raises(torch.neuron.ExpectationError) as info:
        with torch.neuron.expect(recompiles=0, peak_memory=1 << 20):
            for n in (2, 3):
                torch.mm(torch.randn(n, 4, device="neuron"), w)
            big = torch.empty(2 << 20, dtype=torch.uint8, device="neuron")
            del big
    message = str(info.value)
    assert "recompiles: " in message and "aten::mm at " in message
    assert "aten::mm at " in message and "(first: float32[2, 4], float32[4, 4])" in message
    assert "peak_memory: " in message and f"> {1 << 20}" in message


def test_a_block_that_raises_keeps_its_own_error_and_stops_counting():
    with pytest.raises(ZeroDivisionError):
        with torch.neuron.expect(syncs=0):
            torch.ones(1, device="neuron").item()
            1 / 0
    assert not accounting.is_enabled()


@pytest.mark.parametrize("bounds, error, words", [
    ({"sincs": 0}, TypeError, "unexpected keyword argument 'sincs'"),
    ({"syncs": -1}, ValueError, "syncs=-1 is negative"),
    ({"syncs": 1.5}, TypeError, "syncs must be a whole number, not float"),
    ({"syncs": True}, TypeError, "syncs must be a whole number, not bool"),
    ({"peak_memory": "lots"}, ValueError, "peak_memory='lots' is not valid"),
    ({"peak_memory": -5}, ValueError, "peak_memory=-5 is negative"),
])
def test_bad_bounds_are_refused_by_name(bounds, error, words):
    with pytest.raises(error, match=words):
        with torch.neuron.expect(**bounds):
            pass
    assert not accounting.is_enabled()


def test_neuron_expect_checks_a_whole_script_at_exit(python):
    code = "import torch; x = torch.ones(3, device='neuron'); print(x.sum().item())"
    bad = python(code, env={"NEURON_EXPECT": "syncs=0"})
    assert bad.returncode == 1, bad.stderr
    assert "3.0" in bad.stdout  # the script ran to its end
    assert "NEURON_EXPECT: 1 expectation(s) not met" in bad.stderr
    assert "syncs: 1 > 0" in bad.stderr and "<string>:1" in bad.stderr
    good = python(code, env={"NEURON_EXPECT": "syncs=1,host_fallbacks=0"})
    assert good.returncode == 0, good.stderr


def test_neuron_expect_with_a_bad_value_names_the_variable(python):
    out = python("import torch; torch.ones(1, device='neuron')",
                 env={"NEURON_EXPECT": "syncs=zero"})
    assert out.returncode != 0
    assert "NEURON_EXPECT='syncs=zero' is not valid" in out.stderr


def test_neuron_accounting_prints_a_summary_at_exit(python):
    out = python("import torch; x = torch.ones(3, device='neuron'); x.sum().item()",
                 env={"NEURON_ACCOUNTING": "1"})
    assert out.returncode == 0, out.stderr
    assert "torchneuron readiness (NEURON_ACCOUNTING=1)" in out.stderr
    assert "host syncs: 1 (item 1)" in out.stderr


def test_the_pytest_marker_and_neuron_expect_per_test(tmp_path):
    (tmp_path / "test_marked.py").write_text(textwrap.dedent("""
        import pytest, torch

        @pytest.mark.neuron_expect(syncs=0)
        def test_syncs():
            torch.ones(2, device="neuron").sum().item()

        @pytest.mark.neuron_expect(syncs=1)
        def test_within():
            torch.ones(2, device="neuron").sum().item()

        def test_unmarked():
            torch.ones(2, device="neuron").sum().item()
    """))
    run = lambda env: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**__import__("os").environ, **env})
    plain = run({})
    assert "1 failed, 2 passed" in plain.stdout, plain.stdout
    assert "test_syncs: neuron_expect: 1 expectation(s) not met" in plain.stdout
    everywhere = run({"NEURON_EXPECT": "syncs=0"})
    # The marker's bound overrides the run's for test_within; the others break syncs=0.
    assert "2 failed, 1 passed" in everywhere.stdout, everywhere.stdout
