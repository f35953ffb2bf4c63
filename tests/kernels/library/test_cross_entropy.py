"""cross_entropy: from logits and from hidden states times the output projection, chunked over
the vocabulary (small chunks here, so a test crosses several), ignore_index and the three
reductions, against F.cross_entropy on the full logits on the CPU, forward and gradients."""

import importlib

import pytest
import torch

from torchneuron.kernels import library as kl

from .compare import check_op

module = importlib.import_module("torchneuron.kernels.library.cross_entropy")


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    monkeypatch.setattr(module, "CHUNK", 300)  # 700 classes: chunks of 300, 300, 100


def _targets(rows, vocab):
    target = torch.randint(0, vocab, (rows,))
    target[::7] = -100
    return target


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_from_logits(mode, reduction, dtype):
    logits, target = torch.randn(130, 700).to(dtype), _targets(130, 700)
    check_op(lambda x, t: kl.cross_entropy(x, t, reduction=reduction),
             lambda x, t: kl.cross_entropy_reference(x, t, reduction=reduction), [logits, target],
             differentiable=(0,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_from_hidden_states_without_the_logits(mode, reduction, dtype):
    hidden, target = torch.randn(70, 24).to(dtype), _targets(70, 700)
    weight = (torch.randn(700, 24) / 5).to(dtype)
    check_op(lambda x, t, w: kl.cross_entropy(x, t, w, reduction=reduction),
             lambda x, t, w: kl.cross_entropy_reference(x, t, w, reduction=reduction),
             [hidden, target, weight], differentiable=(0, 2))


def test_the_op_makes_no_block_larger_than_a_chunk(monkeypatch, mode):
    """The op (compiled graphs, simulate mode) holds the hidden form's logits only chunk by
    chunk: every chunk step sees at most CHUNK columns."""
    widths = []
    stats = module._chunk_stats
    monkeypatch.setattr(module, "_chunk_stats",
                        lambda logits, *a: widths.append(logits.shape[1]) or stats(logits, *a))
    hidden, target = torch.randn(9, 8, device="neuron"), torch.randint(0, 700, (9,))
    module.cross_entropy_op(hidden, target.to("neuron"), torch.randn(700, 8, device="neuron"),
                            -100, "mean")
    assert widths == [300, 300, 100]


def test_the_eager_hidden_form_holds_less_than_the_logits(monkeypatch):
    """Eager, forward and backward from hidden states stay below one full logits tensor (the
    composite holds three: logits, log-softmax and their gradient)."""
    monkeypatch.setattr(module, "CHUNK", 100)  # blocks of 64 * 100 // 700 = 9 rows
    monkeypatch.setattr(module, "HIDDEN_FUNCTION_MIN_LOGITS", 0)
    hidden = torch.randn(64, 8, device="neuron", requires_grad=True)
    weight = torch.randn(700, 8, device="neuron", requires_grad=True)
    target = torch.randint(0, 700, (64,), device="neuron")
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    kl.cross_entropy(hidden, target, weight).backward()
    torch.neuron.synchronize()
    assert torch.neuron.max_memory_allocated() - base < 64 * 700 * 4


def test_reference_is_f_cross_entropy():
    logits, target = torch.randn(5, 11), torch.tensor([1, -100, 3, 10, 0])
    torch.testing.assert_close(kl.cross_entropy_reference(logits, target),
                               torch.nn.functional.cross_entropy(logits, target))


def test_errors():
    x, t = torch.randn(4, 10, device="neuron"), torch.tensor([1, 2, 3, 4], device="neuron")
    with pytest.raises(ValueError, match="reduction='avg'"):
        kl.cross_entropy(x, t, reduction="avg")
    with pytest.raises(ValueError, match=r"\(rows, features\) and target \(rows,\)"):
        kl.cross_entropy(x[None], t)
    with pytest.raises(TypeError, match="target has dtype torch.float32"):
        kl.cross_entropy(x, t.float())
    with pytest.raises(ValueError, match=r"weight \(5, 9\) torch.float32 must be \(vocab, 10\)"):
        kl.cross_entropy(x, t, torch.randn(5, 9, device="neuron"))
    with pytest.raises(RuntimeError, match="cross_entropy: target is on cpu"):
        kl.cross_entropy(x, t.cpu())


def test_merge_and_reduction_kernels_in_the_simulator_match_the_composite():
    """The chunk merge (an online logaddexp) and the final reduction as NKI kernels, on CPU
    tensors, over three row tiles (the last partial)."""
    g = torch.Generator().manual_seed(0)
    lse, chunk_lse = torch.randn(300, 1, generator=g) * 5, torch.randn(300, 1, generator=g) * 5
    picked, chunk_picked = torch.randn(300, 1, generator=g), torch.randn(300, 1, generator=g)
    merged_lse, merged_picked = module.merge_stats_kernel(lse, picked, chunk_lse, chunk_picked)
    torch.testing.assert_close(merged_lse, torch.logaddexp(lse, chunk_lse))
    torch.testing.assert_close(merged_picked, picked + chunk_picked)
    valid = (torch.rand(300, 1, generator=g) > 0.3).float()
    for mean in (True, False):
        losses, loss = module.loss_reduction_kernel(lse, picked, valid, mean)
        expected = (lse - picked) * valid
        torch.testing.assert_close(losses, expected)
        torch.testing.assert_close(loss.reshape(()),
                                   expected.sum() / valid.sum() if mean else expected.sum())


def test_every_row_ignored_gives_nan_as_f_cross_entropy(mode):
    logits, target = torch.randn(6, 700), torch.full((6,), -100)
    expected = kl.cross_entropy_reference(logits, target)
    actual = kl.cross_entropy(logits.to("neuron"), target.to("neuron"))
    assert expected.isnan() and actual.cpu().isnan()


def test_simulate_mode_merges_and_reduces_in_nki(monkeypatch, simulate):
    calls = []
    for name in ("merge_stats_kernel", "loss_reduction_kernel"):
        kernel = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, kernel=kernel, name=name: calls.append(name) or kernel(*a))
    logits, target = torch.randn(9, 700), _targets(9, 700)
    loss = kl.cross_entropy(logits.to("neuron"), target.to("neuron"))
    torch.testing.assert_close(loss.cpu(), kl.cross_entropy_reference(logits, target))
    assert calls == ["merge_stats_kernel"] * 2 + ["loss_reduction_kernel"]  # 3 chunks, 1 loss
