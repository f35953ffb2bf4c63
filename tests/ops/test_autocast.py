"""torch.autocast("neuron") as a user meets it: bfloat16 by default, float16 on request, the
AMP queries, GradScaler, and training loops that track the CPU's autocast loops."""

import threading
import warnings

import pytest
import torch


def test_default_dtype_is_bfloat16_and_autocast_is_available():
    assert torch.amp.is_autocast_available("neuron")
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron"):
        assert torch.is_autocast_enabled("neuron")
        out = a @ a
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), a.cpu().bfloat16() @ a.cpu().bfloat16())
    assert not torch.is_autocast_enabled("neuron")


def test_float16_is_accepted_and_restores_the_default():
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.float16):
        assert torch.get_autocast_dtype("neuron") == torch.float16
        out = torch.nn.functional.linear(a, a)
    assert out.dtype == torch.float16
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    torch.testing.assert_close(out.cpu(), torch.nn.functional.linear(a.cpu().half(), a.cpu().half()))


def test_unsupported_dtype_warns_and_disables_autocast():
    a = torch.randn(4, 4, device="neuron")
    with pytest.warns(UserWarning, match="neuron autocast.*not supported"):
        with torch.autocast("neuron", dtype=torch.float32):
            out = a @ a
    assert out.dtype == torch.float32


def test_disabled_region_and_nesting():
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron"):
        with torch.autocast("neuron", enabled=False):
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.bfloat16


def test_cpu_autocast_does_not_touch_neuron_tensors():
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("cpu"):
        assert (a @ a).dtype == torch.float32


def test_other_threads_start_at_atens_thread_default():
    # ATen keeps the autocast dtype per thread; documented in docs/autocast.md.
    seen = []
    t = threading.Thread(target=lambda: seen.append(torch.get_autocast_dtype("neuron")))
    t.start()
    t.join()
    assert seen == [torch.float16]


def _train(device, dtype, steps=30, scaler=False):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    grad_scaler = torch.amp.GradScaler(device) if scaler else None
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(64, 16, generator=gen), torch.randint(0, 4, (64,), generator=gen)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        with torch.autocast(device, dtype=dtype):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
        assert logits.dtype == dtype and loss.dtype == torch.float32
        opt.zero_grad()
        if grad_scaler is None:
            loss.backward()
            opt.step()
        else:
            grad_scaler.scale(loss).backward()
            grad_scaler.step(opt)
            grad_scaler.update()
        losses.append(loss.item())
    return torch.tensor(losses)


@pytest.mark.parametrize("dtype,scaler", [(torch.bfloat16, False), (torch.float16, True)],
                         ids=["bfloat16", "float16+GradScaler"])
def test_training_under_autocast_converges_like_cpu(dtype, scaler):
    neuron = _train("neuron", dtype, scaler=scaler)
    cpu = _train("cpu", dtype, scaler=scaler)
    assert neuron[-1] < 0.5 * neuron[0]
    # Same data, same seed, same casts for the ops both devices list: the runs stay together.
    torch.testing.assert_close(neuron, cpu, rtol=2e-2, atol=2e-2)


def test_grad_scaler_skips_steps_with_inf_and_backs_off():
    model = torch.nn.Linear(4, 1).neuron()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=2.0 ** 16)
    before = model.weight.detach().clone()
    with torch.autocast("neuron", dtype=torch.float16):
        loss = model(torch.full((2, 4), float("inf"), device="neuron")).float().sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0 ** 15
    torch.testing.assert_close(model.weight.detach(), before)  # the step was skipped


def test_grad_scaler_leaves_the_float64_policy_as_it_was():
    from torchneuron.ops import dtype_policy

    policy = dtype_policy.get()
    model = torch.nn.Linear(4, 1).neuron()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron")
    scaler.scale(model(torch.randn(2, 4, device="neuron")).sum()).backward()
    scaler.step(opt)
    assert dtype_policy.get() == policy
    if policy == "error":
        with pytest.raises(NotImplementedError, match="float64"):
            torch.ones(2, device="neuron", dtype=torch.float64).reciprocal()
