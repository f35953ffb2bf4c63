"""The readiness accounting (torch.neuron.readiness_summary, device/accounting.py over
csrc/aten/Accounting.h): programs with known counts of host fallbacks, host syncs, shape
signatures, recompiles and dynamic-shape uses, each finding at the test's own line; results stay
equal to the CPU's while it counts."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import torchneuron  # noqa: F401
from torchneuron.device import accounting

HERE = __file__.rsplit("/", 1)[1]


def line_of(marker: str) -> str:
    """"test_readiness_accounting.py:N" of the line holding `marker` (a comment) in this file."""
    for number, text in enumerate(inspect.getsource(inspect.getmodule(line_of)).splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}"):
            return f"{HERE}:{number}"
    raise AssertionError(marker)


@pytest.fixture
def fresh():
    """Nothing seen before the test (signatures included), as in a new process."""
    accounting.reset_readiness()


def at_line(rows, marker):
    where = line_of(marker)
    return [r for r in rows if r["location"].endswith(where)]


def test_off_by_default_and_nothing_counted_while_off():
    assert not accounting.is_enabled()
    accounting.reset_readiness()
    x = torch.ones(3, device="neuron")
    (x + 1).sum().item()
    summary = torch.neuron.readiness_summary()
    assert summary["syncs"]["count"] == 0 and summary["signatures"]["count"] == 0


def test_item_in_a_loop_counts_one_sync_per_item():
    x = torch.arange(6.0, device="neuron")
    with accounting.measure() as block:
        total = 0.0
        for i in range(5):
            total += x[i].item()  # item-loop
    assert total == torch.arange(6.0)[:5].sum().item()
    syncs = block.summary["syncs"]
    assert syncs["by_cause"] == {"item": 5}
    [site] = at_line(syncs["sites"], "item-loop")
    assert site["count"] == 5 and site["op"] == "aten::_local_scalar_dense"


def test_copies_to_the_host_and_printing_are_syncs(capsys):
    x = torch.arange(4.0, device="neuron")
    with accounting.measure() as block:
        y = x.cpu()  # to-cpu
        print(x)  # print-it
    torch.testing.assert_close(y, torch.arange(4.0))
    sites = block.summary["syncs"]["sites"]
    assert at_line(sites, "to-cpu")[0]["cause"] == "copy to host"
    assert at_line(sites, "to-cpu")[0]["bytes_to_host"] == 16
    assert at_line(sites, "print-it"), sites
    assert "tensor([0., 1., 2., 3.], device='neuron:0')" in capsys.readouterr().out


def test_data_dependent_shapes_and_synchronize_are_syncs():
    x = torch.tensor([0.0, 1.0, 0.0, 2.0], device="neuron")
    with accounting.measure() as block:
        nz = torch.nonzero(x)  # nonzero
        torch.neuron.synchronize()  # sync-call
    torch.testing.assert_close(nz.cpu(), torch.nonzero(x.cpu()))
    causes = block.summary["syncs"]["by_cause"]
    assert causes["data-dependent shape"] == 1 and causes["synchronize"] == 1
    assert at_line(block.summary["syncs"]["sites"], "nonzero")[0]["op"] == "aten::nonzero"


def test_boolean_mask_indexing_is_a_sync_and_integer_indexing_is_not():
    x = torch.arange(6.0, device="neuron")
    idx = torch.tensor([0, 2], device="neuron")
    with accounting.measure() as block:
        picked = x[idx]  # int-index
        masked = x[x > 2]  # bool-index
    torch.testing.assert_close(picked.cpu(), torch.tensor([0.0, 2.0]))
    torch.testing.assert_close(masked.cpu(), torch.tensor([3.0, 4.0, 5.0]))
    sites = block.summary["syncs"]["sites"]
    assert not at_line(sites, "int-index")
    assert at_line(sites, "bool-index")[0]["cause"] == "data-dependent shape"


def test_sequence_length_sweep_counts_a_signature_per_length_and_recompiles(fresh):
    w = torch.randn(16, 16, device="neuron")
    outs = []
    with accounting.measure() as block:
        for length in (8, 16, 32, 16):
            a = torch.randn(length, 16)
            outs.append((a, torch.mm(a.to("neuron"), w)))  # sweep
    for a, out in outs:
        torch.testing.assert_close(out.cpu(), torch.mm(a, w.cpu()))
    [site] = [r for r in at_line(block.summary["signatures"]["sites"], "sweep")
              if r["op"] == "aten::mm"]
    # Three lengths: three signatures, the first a compile, the other two recompiles; the
    # repeated length is neither.
    assert (site["signatures"], site["recompiles"]) == (3, 2)
    assert site["first_signature"] == "float32[8, 16], float32[16, 16]"


def test_float64_arithmetic_is_a_host_fallback_with_bytes_and_cpu_time():
    x = torch.arange(4, dtype=torch.float64, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the float64 policy's once-per-op warning
        with accounting.measure() as block:
            y = x * 3  # float64-mul
    torch.testing.assert_close(y.cpu(), torch.arange(4, dtype=torch.float64) * 3)
    fallbacks = block.summary["host_fallbacks"]
    [row] = at_line(fallbacks["ops"], "float64-mul")
    assert row["op"] == "aten::mul.Tensor" and row["reason"] == "float64" and row["calls"] == 1
    assert row["bytes_to_host"] == 32 and row["bytes_from_host"] == 32
    assert row["cpu_seconds"] > 0
    assert fallbacks["calls"] >= 1


def test_sparse_ops_are_host_fallbacks():
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    s = dense.to_sparse().to("neuron")
    with accounting.measure() as block:
        total = s + s  # sparse-add
    torch.testing.assert_close(total.to_dense().cpu(), dense * 2)
    [row] = at_line(block.summary["host_fallbacks"]["ops"], "sparse-add")
    assert (row["op"], row["reason"], row["calls"]) == ("aten::add.Tensor", "sparse", 1)


def test_counts_are_the_same_in_sync_and_async_mode(python):
    code = """
import torch, torchneuron
from torchneuron.device import accounting
x = torch.arange(8.0, device="neuron")
with accounting.measure() as b:
    for i in range(3):
        y = (x * i).sum().item()
    z = torch.nonzero(x)
s = b.summary
print(s["syncs"]["count"], s["signatures"]["count"], s["host_fallbacks"]["calls"])
"""
    outs = {mode: python(code, env={"NEURON_EAGER_MODE": mode}) for mode in ("sync", "async")}
    for mode, out in outs.items():
        assert out.returncode == 0, (mode, out.stderr)
    assert outs["sync"].stdout == outs["async"].stdout
    assert outs["sync"].stdout.split()[0] == "4"  # three items and one nonzero


def test_backward_ops_are_found_at_the_backward_call(fresh):
    w = torch.randn(4, 4, device="neuron", requires_grad=True)
    x = torch.randn(3, 4)
    with accounting.measure() as block:
        loss = (x.to("neuron") @ w).sum()
        loss.backward()  # backward-call
    torch.testing.assert_close(w.grad.cpu(), x.sum(0, keepdim=True).t().expand(4, 4))
    assert at_line(block.summary["signatures"]["sites"], "backward-call"), \
        block.summary["signatures"]


def test_mark_dynamic_and_dynamic_true_are_counted_and_dynamo_recompiles_have_reasons():
    torch._dynamo.reset()

    def f(t):
        return t * 2 + 1

    def h(t):  # its own code object: a second compile of f would be a recompile of f
        return t * 3 + 1

    with accounting.measure() as block:
        a = torch.randn(6, device="neuron")
        torch._dynamo.mark_dynamic(a, 0)  # mark-dynamic
        torch.compile(f, backend="eager")(a)
        torch.compile(h, backend="eager", dynamic=True)(torch.randn(5, device="neuron"))
        g = torch.compile(lambda t: t - 1, backend="eager", dynamic=False)
        g(torch.randn(3, device="neuron"))
        g(torch.randn(4, device="neuron"))
    torch._dynamo.reset()
    dyn = block.summary["dynamo"]
    kinds = sorted(use["kind"] for use in dyn["dynamic_shapes"])
    assert kinds == ["dynamic=True", "mark_dynamic"]
    assert [u for u in dyn["dynamic_shapes"] if u["kind"] == "mark_dynamic"][0][
        "location"].endswith(line_of("mark-dynamic"))
    assert dyn["recompiles"] == 1 and "size mismatch" in dyn["reasons"][0]["reason"]
    assert block.summary["recompiles"] >= 1
    assert torch._dynamo.mark_dynamic is not accounting._counting_mark_dynamic  # put back


def test_peak_memory_is_the_blocks_own_and_nested_blocks_keep_theirs():
    torch.ones(1, device="neuron")  # device state exists, so the baseline below is read
    base = torch.neuron.memory_allocated()  # what earlier tests keep alive counts in any peak
    with accounting.measure() as outer:
        big = torch.empty(4 << 20, dtype=torch.uint8, device="neuron")
        del big
        with accounting.measure() as inner:
            small = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
            del small
    assert outer.summary["memory"]["peak_bytes"] - base >= 4 << 20
    assert (1 << 20) <= inner.summary["memory"]["peak_bytes"] - base < 4 << 20
    assert outer.summary["memory"]["hbm_bytes"] > 0 and outer.summary["memory"]["fits"]


def test_summary_has_the_documented_keys():
    summary = torch.neuron.readiness_summary()
    assert summary["schema"] == 1
    assert set(summary) == {"schema", "host_fallbacks", "syncs", "signatures", "dynamo",
                            "recompiles", "memory"}
    assert set(summary["host_fallbacks"]) == {"calls", "bytes_to_host", "bytes_from_host",
                                              "cpu_seconds", "ops"}
    assert set(summary["syncs"]) == {"count", "by_cause", "sites"}
    assert set(summary["signatures"]) == {"count", "recompiles", "sites"}
    assert set(summary["dynamo"]) == {"recompiles", "reasons", "dynamic_shapes"}
    assert set(summary["memory"]) == {"peak_bytes", "hbm_bytes", "fits"}


def test_stop_without_start_is_an_error():
    with pytest.raises(RuntimeError, match="stop\\(\\) without a matching start\\(\\)"):
        accounting.stop()
