"""A neuron-compiled chain in an asynchronous process (NEURON_EAGER_MODE=async, set here so that
`make test-sync` checks the same): the call queues the kernels behind the work already on the
stream (held there until the test releases it) and returns before they ran, from any thread,
without waiting for the device, and calls run in order; the results equal eager CPU once
synchronized. The chains compile on the cache's background thread."""

from __future__ import annotations

import json

ASYNC_PROCESS = """
import json, threading, torch
import torchneuron
from torchneuron._C import compile as _compile_c
from torchneuron._C import launch as _launch_c
from torchneuron.fused_eager import ChainCache, compile_chain
from tests.fused_eager import chains

torch.manual_seed(0)
assert torchneuron.runtime.execution.mode() == "async"
report = {}
compile_threads = []

def compile(chain, threads, device):
    compile_threads.append(threading.current_thread().name)
    return compile_chain(chain, threads, device)

cache = ChainCache(hot=1, compile=compile)

def kernel_for(chain):
    assert cache.lookup(chain, "neuron") is None and cache.wait(timeout=240)
    return cache.lookup(chain, "neuron")

class HeldStream:
    # Work on the current stream that runs until released: a Python function queued with
    # launch_neuron (what the generated wrappers call), which the stream's worker calls with the
    # GIL and which then waits, GIL-free, for the test. Whatever is queued after it waits too,
    # so an idle stream right after a call means the call ran or waited for its kernels.

    def __init__(self):
        self.gate = threading.Event()
        _compile_c.launch_kernel(lambda tensor, seconds: self.gate.wait(seconds),
                          torch.empty(1, device="neuron"), 30.0)

    def release(self):
        self.gate.set()
        torch.neuron.synchronize()

def is_idle():
    return torch.neuron.current_stream().query() or _launch_c.device_idle()

chain, inputs = chains.twenty_ops()
kernel = kernel_for(chain)
neuron_inputs = chains.on_device(inputs, "neuron")
(out,) = [spec.empty("neuron") for spec in chain.output_specs()]
kernel(neuron_inputs, [out])  # the first call loads what Inductor loads lazily
torch.neuron.synchronize()

# 1. The call returns before its kernel ran, queued after the work on the stream.
out.zero_()
held = HeldStream()
kernel(neuron_inputs, [out])
report["idle_after_call"] = is_idle()
held.release()
torch.testing.assert_close(out.cpu(), chain.run_eager(inputs)[0])

# 2. Another thread (holding the GIL as any Python thread does) calls it with other tensors.
chain2, inputs2 = chains.twenty_ops()
outputs2 = [spec.empty("neuron") for spec in chain2.output_specs()]
neuron_inputs2 = chains.on_device(inputs2, "neuron")
held = HeldStream()
caller = threading.Thread(target=kernel, args=(neuron_inputs2, outputs2))
caller.start(); caller.join()
report["idle_after_thread_call"] = is_idle()
held.release()
torch.testing.assert_close(outputs2[0].cpu(), chain2.run_eager(inputs2)[0])

# 3. x * lr with a changing lr: one kernel, each call reads its own lr when it runs.
chain3, (x, _) = chains.scaled_by_tensor()
scale = kernel_for(chain3)
xn = x.to("neuron")
lrs = {lr: torch.tensor(lr, dtype=torch.float64, device="neuron") for lr in (0.1, 0.01, 3e-4)}
held = HeldStream()
results = {lr: scale.run([xn, lr_tensor])[0] for lr, lr_tensor in lrs.items()}
report["idle_after_lr_calls"] = is_idle()
held.release()
for lr, got in results.items():
    assert torch.equal(got.cpu(), x * lr), lr

# 4. An in-place chain queued twice runs in order: the second call reads the first's result.
chain4, (p, g, one) = chains.in_place()
update = kernel_for(chain4)
pn, gn = p.to("neuron"), g.to("neuron")
held = HeldStream()
update([pn, gn, one], [])
update([pn, gn, one], [])
report["idle_after_in_place"] = is_idle()
held.release()
torch.testing.assert_close(pn.cpu(), (p * g + 1.0) * g + 1.0)

report["compile_threads"] = compile_threads
print(json.dumps(report))
"""


def test_a_neuron_chain_call_is_queued_and_returns_before_its_kernel_ran(python):
    done = python(ASYNC_PROCESS, env={"NEURON_EAGER_MODE": "async"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    compile_threads = report.pop("compile_threads")
    assert report == {"idle_after_call": False, "idle_after_thread_call": False,
                      "idle_after_lr_calls": False, "idle_after_in_place": False}, report
    assert compile_threads == ["neuron-fusion-compile"] * 3, compile_threads
