"""Run by test_memory_advisor.py in a process whose HBM is small (NEURON_HBM_BYTES): a model
that does not fit, the advisor's estimates for it (from a full-size FakeTensorMode trace), the
out-of-memory message of its real run, and each suggestion applied for real: whether it fits,
its measured peak, and its first loss against the CPU's. Prints one JSON object."""

import copy
import gc
import json
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import checkpoint

import torchneuron  # noqa: F401

D, L, B = 256, 4, 2048  # 8 MiB of fp32 parameters, 72 MiB of activations at batch B


def build(device: str) -> torch.nn.Module:
    with torch.device(device):
        return torch.nn.Sequential(*[torch.nn.Sequential(
            torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))
            for _ in range(L)])


def make_step(model, x, change):
    opt = torch.optim.Adam(model.parameters())
    losses = []

    def forward():
        if change == "checkpointing":
            h = x
            for block in model:
                h = checkpoint(block, h, use_reentrant=False)
            return h
        if change == "bf16":
            with torch.autocast(x.device.type, dtype=torch.bfloat16):
                return model(x)
        return model(x)

    def step():
        loss = forward().float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return step, opt, losses


def cpu_loss(state, x, change):
    model = build("cpu")
    model.load_state_dict(state)
    step, _, losses = make_step(model, x, change)
    step()
    return losses[0]


def release():
    """Frees what earlier cases left (an out-of-memory's traceback holds their tensors)."""
    gc.collect()
    torch.neuron.synchronize()
    torch.neuron.empty_cache()


def limit(fraction):
    release()
    torch.neuron.set_per_process_memory_fraction(fraction)


def apply(change, batch, estimate, fraction=None):
    """Runs two steps with `change` on the device; its peak and first loss (CPU's beside it)."""
    release()
    torch.manual_seed(0)
    model = build("cpu")
    state = copy.deepcopy(model.state_dict())
    x = torch.randn(batch, D)
    if fraction is not None:
        torch.neuron.set_per_process_memory_fraction(fraction)
    torch.neuron.reset_peak_memory_stats()
    step, opt, losses = make_step(model.to("neuron"), x.to("neuron"), change)
    try:
        step()
        step()
        torch.neuron.synchronize()
    except torch.OutOfMemoryError as e:
        return {"fits": False, "error": str(e), "estimate": estimate}
    expected = cpu_loss(state, x, change)
    torch.testing.assert_close(losses[0].cpu(), expected,
                               **({"atol": 2e-2, "rtol": 2e-2} if change == "bf16" else {}))
    return {"fits": True, "peak": torch.neuron.max_memory_allocated(), "estimate": estimate}


def explain(batch):
    """The advisor's view of the step at `batch`, from a full-size FakeTensorMode trace."""
    with FakeTensorMode():
        model = build("neuron")
        step, opt, _ = make_step(model, torch.randn(batch, D, device="neuron"), None)
        return torch.neuron.memory.explain(step, model, opt, batch_size=batch)


def suggestion(explained, prefix):
    return next(s for s in explained.suggestions if s.change.startswith(prefix))


def main(case):
    """One case per process: an out-of-memory run leaves its queued work's memory behind."""
    # The device is 96 MiB (NEURON_HBM_BYTES); the per-process fraction sets what each case
    # may use: the step needs ~107 MiB, so it fits nowhere without a change.
    if case == "inline":  # an op that fails on the calling thread (backward's run on autograd's)
        torch.manual_seed(0)
        model = build("neuron")
        opt = torch.optim.Adam(model.parameters())
        model(torch.ones(8, D, device="neuron")).sum().backward()
        opt.step()
        try:
            torch.empty(96 << 20, dtype=torch.uint8, device="neuron")
            out = {"fits": True}
        except torch.OutOfMemoryError as e:
            out = {"fits": False, "error": str(e)}
    elif case == "verdict":  # a request that fails, and would fit at half the batch
        held = torch.empty(60 << 20, dtype=torch.uint8, device="neuron")  # noqa: F841
        in_use = torch.neuron.memory_allocated()
        try:
            torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
            out = {"fits": True}
        except torch.OutOfMemoryError as e:
            out = {"fits": False, "error": str(e), "in_use": in_use}
    elif case in ("base", "bf16"):
        explained = explain(B)
        if case == "base":
            out = apply(None, B, explained.peak.needed)
            out["text"] = str(explained)
        else:
            out = apply("bf16", B, suggestion(explained, "bf16").peak)
            out["fits_estimated"] = suggestion(explained, "bf16").fits
    elif case in ("checkpointing", "batch"):
        limit(72 / 96)  # 72 MiB
        tight = explain(B)
        if case == "checkpointing":
            out = apply("checkpointing", B, suggestion(tight, "activation").peak)
            out["fits_estimated"] = suggestion(tight, "activation").fits
        else:
            batch = suggestion(tight, "batch ")
            smaller = int(batch.change.split()[1])
            out = apply(None, smaller, batch.peak)
            out.update(size=smaller, fits_estimated=batch.fits)
    else:  # the allocator's one setting: a step that fits the device but not 40% of it
        limit(0.4)
        limited = explain(B // 4)
        whole = suggestion(limited, "the whole device")
        if case == "fraction_limited":
            out = apply(None, B // 4, limited.peak.needed, fraction=0.4)
        else:
            out = apply(None, B // 4, whole.peak, fraction=1.0)
            out.update(text=str(limited), fits_estimated=whole.fits)
    print(json.dumps(out))


main(sys.argv[1])
