"""Cases run in a process with NEURON_EAGER_MODE=fused (tests/fused_eager/test_fused_mode.py starts it):
each runs eager code on neuron enough times for its chains to be hot and compiled, compares every
result with the same code on the CPU, and reports what the queue held and fused. Printed as one
JSON line: {case: {"ok": bool, "error": str, "stats": {...} (the counters' change)}}."""

from __future__ import annotations

import json
import sys
import threading

import torch

import torchneuron
from torchneuron.fused_eager import queue_feeder

CALLS = 5  # with NEURON_FUSION_HOT=2: cold, cold (compile), then fused


def delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after if isinstance(after[k], (int, float))}


def run(fn, *args, calls=CALLS, sync_each=True):
    """fn(*args) on the CPU once and on neuron `calls` times; every neuron call's results equal
    the CPU's."""
    def on(device):
        return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]

    expected = fn(*on("cpu"))
    for _ in range(calls):
        got = fn(*on("neuron"))
        if sync_each:
            torch.neuron.synchronize()
            queue_feeder.wait(240)
        torch.testing.assert_close(to_cpu(got), expected)


def to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def chain_of_pointwise(x, y):
    a = x * 2.0
    b = a + y
    c = torch.sin(b)
    d = c * c - 0.5
    return torch.relu(d)


def kept_intermediate(x, y):
    # `a` is still referenced from Python when the chain is handed over: it must be written.
    a = x * 3.0
    b = torch.exp(a - y)
    c = b / (1.0 + b)
    return a, c


def in_place_on_inputs(p, g):
    p = p.clone()
    torch.neuron.synchronize() if p.is_neuron else None
    for _ in range(3):
        p.mul_(0.9)
        p.add_(g, alpha=0.1)
        p.clamp_(-1.0, 1.0)
    return p


def in_place_on_a_result(x):
    y = x * 2.0
    y.add_(1.0)
    y.mul_(y)
    return torch.tanh(y)


def out_arguments(x, y):
    # out= ops join chains (written into out); a chain whose results are all dropped still runs.
    out = torch.empty_like(x)
    a = x * 2.0
    torch.neg(a, out=out)
    torch.mul(out, y, out=out)
    (out + 1.0).sin()  # dropped
    return out


def reductions(x, y):
    return (x * y + 1.0).sum(), torch.abs(x - y).mean(dim=1), (x * x).amax()


def varying_floats(x, y):
    # A compiled-in float (a clamp bound: its kernel specializes on the value) that changes from
    # chain to chain: each value is another signature; after a few of them the rest run unfused
    # instead of each being compiled. (Synchronized after each value: chains reading the same
    # tensors would otherwise merge into one chain with all twelve values.)
    results = []
    for i in range(VARYING_VALUES):
        results.append(torch.clamp(torch.sin(x), min=-1.0 + i / 50) + y)
        if x.is_neuron:
            torch.neuron.synchronize()
    return results


VARYING_VALUES = 12


def runtime_floats(p, g):
    # AdamW's per-parameter update with floats that change every step (bias corrections, step
    # size, a scheduled rate, a lerp weight crossing 0.5): the kernel reads them at each call,
    # so every step runs the same compiled chains.
    p, m, v = p.clone(), torch.zeros_like(p), torch.zeros_like(p)
    for step in range(1, RUNTIME_STEPS + 1):
        m.lerp_(g, 0.1 * step)
        m.clamp_(-10.0, 10.0)
        v.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
        denom = (v.sqrt() / (1 - 0.999 ** step) ** 0.5).add_(1e-8)
        p.addcdiv_(m, denom, value=-1e-3 / (1 - 0.9 ** step))
        p.add_(g, alpha=-0.01 * step)
        if p.is_neuron:
            torch.neuron.synchronize()  # one chain per step, each with the step's values
    return p, m, v


RUNTIME_STEPS = 8


def interleaved_chains(x, y):
    # Two independent chains issued op by op in turn are held side by side and merged where an
    # op reads both; an in-place write to a tensor another chain read joins that chain (after
    # the read: `a` is computed from x before x changes).
    a = x * 2.0
    b = y * 3.0
    a = a.sin()
    b = b.cos()
    x = x.clone()
    c = x * 0.5
    x.add_(1.0)
    return a + b, c, x


def shared_inputs(x, y):
    # Calls of one function on the same tensors, without a synchronization between them: chains
    # that only read the same memory stay apart (each call one chain of 6 ops, the same
    # signature every time), where merging them would make run-on chains cut at shifting places.
    return [chain_of_pointwise(x, y) for _ in range(SHARED_INPUT_CALLS)]


SHARED_INPUT_CALLS = 4


def many_open_chains(x, y):
    # More independent work than the held chains may keep (512 ops): the least recently joined
    # chains are handed over as later ones open, so the held results' memory stays bounded.
    x = x[:32]
    results = []
    for i in range(MANY_CHAINS):
        a = x + i / MANY_CHAINS
        results.append(((a.sin() * 2.0 - y[:32]).abs() + 1.0).sqrt())
    if x.is_neuron:
        held = queue_feeder.stats()["held_now"]
        assert 0 < held <= 512, held
    return results


MANY_CHAINS = 100  # of 6 ops each


def per_parameter_updates(x, y):
    # AdamW's single-tensor loop, weight decay included: each parameter's mul_, lerp_ and moment
    # update read no result of each other until addcdiv_, and are one chain per parameter.
    params = [x.clone(), y.clone()[:64].contiguous(), (x + y)[:, :512].contiguous()]
    grads = [torch.cos(p) for p in params]
    if x.is_neuron:
        torch.neuron.synchronize()
    states = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
    for step in range(1, UPDATE_STEPS + 1):
        for p, g, (m, v) in zip(params, grads, states):
            p.mul_(1 - 1e-3 * 0.01)
            m.lerp_(g, 0.1)
            v.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
            denom = (v.sqrt() / (1 - 0.999 ** step) ** 0.5).add_(1e-8)
            p.addcdiv_(m, denom, value=-1e-3 / (1 - 0.9 ** step))
        if x.is_neuron:
            torch.neuron.synchronize()  # each step's chains are handed over: one per parameter
    return params, states


UPDATE_STEPS = 3


def foreach_optimizer(x, y):
    # torch.optim.AdamW takes its foreach path on neuron (as on CUDA): each _foreach_ op sweeps
    # all parameters, so a parameter's ops are far apart in program order; each parameter still
    # makes one chain.
    params = [torch.nn.Parameter(t) for t in (x.clone(), y[:64].clone(), x[:, :512].clone())]
    for p in params:
        p.grad = torch.sin(p.detach())
    opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=True)
    for _ in range(UPDATE_STEPS):
        opt.step()
    return [p.detach() for p in params]


def broken_by_item(x):
    a = x * 2.0 + 1.0
    s = a.sum().item()  # a synchronization point inside: the chain is handed over first
    return torch.sigmoid(a * s)


def through_a_view(x):
    a = x * 2.0
    v = a.view(-1)  # a view of a held result: a later op reading it starts a new chain
    b = v + 1.0
    return a.sin(), b


def mixed_dtypes(x, h):
    a = x * 2 + 1  # int64 with Python ints
    b = h * 0.5 + 1.0  # float16
    return a, torch.sqrt(b.abs())


def training(x, w):
    w = w.clone().requires_grad_(True)
    for _ in range(2):
        loss = (torch.tanh(x @ w) * 0.5 + 0.25).pow(2).mean()
        loss.backward()
        with torch.no_grad():
            w.mul_(0.99)
            w.add_(w.grad, alpha=-0.1)
            w.grad = None
    return w.detach()


def two_threads(x, y):
    results = [None, None]

    def work(k):
        results[k] = chain_of_pointwise(x * (k + 1), y)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def two_streams(x, y):
    if not x.is_neuron:
        return chain_of_pointwise(x, y) + 1.0
    side = torch.neuron.Stream()
    side.wait_stream(torch.neuron.current_stream())
    with torch.neuron.stream(side):
        a = chain_of_pointwise(x, y)
    for t in (x, y):  # made on the current stream, used on the side stream
        t.record_stream(side)
    torch.neuron.current_stream().wait_stream(side)
    a.record_stream(torch.neuron.current_stream())
    return a + 1.0


def deterministic(x, y):
    # Fusion is off while deterministic algorithms are requested: nothing is held.
    torch.use_deterministic_algorithms(True)
    try:
        return chain_of_pointwise(x, y)
    finally:
        torch.use_deterministic_algorithms(False)


def error_at_the_call(x, y):
    # A shape error inside a chain raises at the call, with the CPU's type and message; the
    # chain's earlier results stay right.
    a = x * 2.0
    try:
        a + y[:, :3]
    except RuntimeError as e:
        assert "must match the size" in str(e), e
    else:
        raise AssertionError("no error")
    return a.cos()


def profiled(x, y):
    # The fused kernel shows on the profiler's device row as one kernel.
    if not x.is_neuron:
        return chain_of_pointwise(x, y)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for _ in range(CALLS):  # cold, hot, then fused
            out = chain_of_pointwise(x, y)
            torch.neuron.synchronize()
            queue_feeder.wait(240)
    names = {e.name for e in prof.events()}
    assert "neuron::fused_chain" in names, sorted(names)
    return out


def _scaled(t):
    return t * 3.0 - 1.0


scaled = torch.compile(_scaled)


def held_then_compiled(x, y):
    """Held ops handed over inside a compiled graph's call (its ItemScope collects them into the
    graph's item): the held work keeps its memory until that item ran."""
    a = x * 2.0
    b = a + y
    del a
    c = scaled(b) if x.device.type == "neuron" else _scaled(b)
    return b * 0.5 + 1.0, c


def long_loop(x):
    y = x
    for _ in range(40):
        y = y * 1.0001 + 0.5
    return y


def held_memory_is_bounded():
    """Held ops keep their results until their chain is handed over: a loop over large tensors
    with no synchronization hands its chain over every few ops (the held bytes' bound, 256 MiB),
    not after 80 ops (1.25 GiB of results here)."""
    x = torch.randn(4 << 20)  # 16 MiB
    xn = x.to("neuron")
    for _ in range(CALLS):
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        y = long_loop(xn)
        peak = torch.neuron.max_memory_allocated() - base
        torch.testing.assert_close(y.cpu(), long_loop(x))
        del y
        assert peak <= (256 + 64) << 20, f"held {peak >> 20} MiB"
    queue_feeder.wait(240)


def main() -> None:
    torch.manual_seed(0)
    assert torchneuron.runtime.execution.mode() == "fused", torchneuron.runtime.execution.mode()
    # Above the size a lone op runs inline at when the device is idle (launch::kInlineBytes, csrc/aten/Launch.h), so
    # that the ops are queued, and so held.
    x, y = torch.randn(128, 1024), torch.randn(128, 1024)
    cases = {
        "chain": lambda: run(chain_of_pointwise, x, y),
        "chain_no_sync_between_calls": lambda: run(chain_of_pointwise, x, y, calls=8,
                                                   sync_each=False),
        "kept_intermediate": lambda: run(kept_intermediate, x, y),
        "in_place_on_inputs": lambda: run(in_place_on_inputs, x, y),
        "in_place_on_a_result": lambda: run(in_place_on_a_result, x),
        "out_arguments": lambda: run(out_arguments, x, y),
        "reductions": lambda: run(reductions, x, y),
        "varying_floats": lambda: run(varying_floats, x, y),
        "runtime_floats": lambda: run(runtime_floats, x, y),
        "interleaved_chains": lambda: run(interleaved_chains, x, y),
        "shared_inputs": lambda: run(shared_inputs, x, y),
        "many_open_chains": lambda: run(many_open_chains, x, y, calls=3),
        "per_parameter_updates": lambda: run(per_parameter_updates, x, y),
        "foreach_optimizer": lambda: run(foreach_optimizer, x, y),
        "broken_by_item": lambda: run(broken_by_item, x),
        "through_a_view": lambda: run(through_a_view, x),
        "mixed_dtypes": lambda: run(mixed_dtypes, torch.randint(-5, 5, (128, 1024)),
                                    torch.randn(128, 1024, dtype=torch.float16)),
        "training": lambda: run(training, torch.randn(512, 256), torch.randn(256, 128)),
        "two_threads": lambda: run(two_threads, x, y),
        "two_streams": lambda: run(two_streams, x, y),
        "deterministic": lambda: run(deterministic, x, y),
        "error_at_the_call": lambda: run(error_at_the_call, x, y),
        "profiled": lambda: run(profiled, x, y, calls=1),
        "held_memory_is_bounded": held_memory_is_bounded,
        "held_then_compiled": lambda: run(held_then_compiled, x, y, sync_each=False),
    }
    only = set(sys.argv[1:])
    report = {}
    for name, case in cases.items():
        if only and name not in only:
            continue
        before = queue_feeder.stats()
        try:
            case()
            report[name] = {"ok": True}
        except Exception as e:  # noqa: BLE001 - reported to the test
            report[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        report[name]["stats"] = delta(before, queue_feeder.stats())
    report["failures"] = queue_feeder.stats()["failures"]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
