"""An op queued on a stream's worker (async mode, the default) whose CPU kernel is a Python
kernel: the kernel sees what the CPU's kernel sees (its input's requires_grad, which the queued
op's snapshots carry, and the caller's grad mode, not the worker's), takes the GIL on the worker
thread, and nothing deadlocks while the caller, holding the GIL between ops, goes on queuing,
freeing tensors, reading results and synchronizing, from two Python threads. Runs in a child
process: the override of aten::logit's CPU kernel stays there, and a deadlock is a timeout."""

import json

QUEUED_PYTHON_KERNEL = """
import json, threading, torch
import torchneuron

assert torchneuron.runtime.execution.mode() == "async"
torch.manual_seed(0)
seen = []

def logit_kernel(x, eps=None):
    # Only plain values are kept: the tensors are CPU aliases of neuron memory for this call.
    seen.append({"requires_grad": x.requires_grad, "grad_enabled": torch.is_grad_enabled(),
                 "device": x.device.type, "on_worker": threading.current_thread().name != "MainThread"
                 and not threading.current_thread().name.startswith("caller")})
    return torch.log(x / (1 - x))

lib = torch.library.Library("aten", "IMPL")
lib.impl("logit", logit_kernel, "CPU")

X = torch.rand(64, 64).mul_(0.8).add_(0.1)

def calls(device, busy):
    # The same sequence on each device; `busy` keeps the neuron device working so each call is
    # queued behind that work (a small op on an idle device runs inline).
    seen.clear()
    results = []
    x = X.to(device)
    # Each signature twice: its first call runs at the call (its results' metadata is learned
    # then), the second is queued.
    for requires_grad, grad_mode in [(True, True), (True, False), (False, True)] * 2:
        leaf = x.detach().requires_grad_(requires_grad)
        busy()
        with torch.set_grad_enabled(grad_mode):
            y = torch.logit(leaf)
            extra = torch.empty(1 << 16, device=device)  # allocated while the kernel is queued
            del extra
        grad = (torch.autograd.grad(y.sum(), leaf)[0].cpu()
                if requires_grad and grad_mode else None)
        results.append((y.detach().cpu(), grad, y.sum().item()))
    return results, [dict(s) for s in seen]

def sleep():
    # 20 ms of device work, started by the stream's worker before this returns: a thread that
    # waits for a stream runs the items the worker has not started itself, so a kernel queued
    # behind work the worker has not picked up yet could run on the caller.
    while True:
        torch.neuron._sleep(2_000_000)
        started = torch.neuron.Event()
        started.record()
        if not started.query():  # queued behind the 2 ms, so the worker itself completes it
            break
    torch.neuron._sleep(20_000_000)
    while not started.query():
        pass

cpu_results, cpu_seen = calls("cpu", lambda: None)
neuron_results, neuron_seen = calls("neuron", sleep)
for (a, ga, sa), (b, gb, sb) in zip(neuron_results, cpu_results):
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(sa, sb)
    assert (ga is None) == (gb is None)
    if ga is not None:
        torch.testing.assert_close(ga, gb)

# Two Python threads queue Python-kernel ops behind device work at once.
errors = []
def caller(i):
    try:
        x = torch.rand(64, 64).mul_(0.8).add_(0.1)
        for _ in range(5):
            sleep()
            torch.testing.assert_close(torch.logit(x.to("neuron")).cpu(), torch.log(x / (1 - x)))
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=caller, args=(i,), name=f"caller{i}") for i in range(2)]
for t in threads: t.start()
for t in threads: t.join()
torch.neuron.synchronize()
print(json.dumps({"cpu": cpu_seen, "neuron": neuron_seen, "errors": errors}))
"""


def test_a_queued_python_cpu_kernel_sees_requires_grad_and_does_not_deadlock(python):
    done = python(QUEUED_PYTHON_KERNEL, env={"NEURON_EAGER_MODE": "async"}, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["errors"] == []
    cpu = [{k: v for k, v in s.items() if k != "on_worker"} for s in report["cpu"]]
    neuron = [{k: v for k, v in s.items() if k != "on_worker"} for s in report["neuron"]]
    # The kernel ran on CPU aliases, with the flags and grad modes the CPU's kernel saw.
    assert [s["device"] for s in neuron] == ["cpu"] * 6
    assert neuron == cpu
    assert [(s["requires_grad"], s["grad_enabled"]) for s in cpu] == [
        (True, True), (True, False), (False, True)] * 2
    # Queued: the second call of each signature ran on the stream's worker, not on the caller.
    assert not any(s["on_worker"] for s in report["cpu"])
    assert [s["on_worker"] for s in report["neuron"][3:]] == [True] * 3
