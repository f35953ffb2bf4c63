"""Compiles a chain with Inductor's C++ code generation into a callable that writes the outputs
into buffers the caller allocated, for one device:

- "cpu": the kernel reads and writes CPU tensors and runs at the call;
- "neuron": the chain is compiled for neuron tensors by torchneuron's Inductor backend
  (torchneuron/compile/inductor.py), so the generated wrapper launches its kernels through
  `launch_neuron` inside `as_one_item`: called with neuron tensors while execution is
  asynchronous, it queues the kernels on the current stream, after the work queued there, and
  returns before they ran. Every tensor input is a neuron tensor then, 0-d ones included: a CPU
  tensor argument makes `launch_neuron` wait for the queue and run the kernel at the call.

Inductor's FX graph cache keeps the generated code on disk under Inductor's cache directory, so
a second process compiling the same chain for the same device loads it (the examples' device is
part of Inductor's key)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
# internal: see runtime/torch_internals.py "torch._guards.tracing"
from torch._guards import TracingContext, tracing
# internal: see runtime/torch_internals.py "torch._subclasses.fake_tensor.FakeTensorMode"
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from .chain import Chain
from .graph import build_graph
from .vector_interleave import fused_tiling

# The devices a chain compiles for, by device type: a neuron chain's kernels run on the stream of
# the tensors they receive, whatever their index.
DEVICES = ("cpu", "neuron")

# Inductor's per-compile outcome counters (process-wide; read as differences around a compile).
CACHE_COUNTERS = (("inductor", "fxgraph_cache_hit"), ("inductor", "fxgraph_cache_miss"),
                  ("inductor", "fxgraph_cache_bypass"))


def check_device(device: Any) -> str:
    """`device` as the name a compiled chain is kept under ("cpu" or "neuron")."""
    if isinstance(device, str) and device in DEVICES:
        return device
    raise ValueError(f"a chain compiles for device 'cpu' or 'neuron' (a device type, as a "
                     f"string), not {device!r}")


@dataclass
class CompiledChain:
    """One chain's generated kernel. Call it with the chain's inputs (tensors of `device` at
    tensor positions; numbers at Scalar positions, whose values are compiled in, and at
    RuntimeScalar positions, whose values the kernel reads at the call) and the
    buffers of the outputs without `into_input`, laid out as chain.output_specs() says. On
    neuron the call queues the kernels on the current stream (when execution is asynchronous)
    and never waits for the device."""
    chain: Chain
    fn: Callable[[list], Any]  # takes the tensors in one list (and may empty it)
    threads: int
    compile_seconds: float
    cache_counts: dict[str, int]  # what Inductor's caches answered for this compile
    device: str = "cpu"

    def __call__(self, inputs: Sequence[Any], outputs: Sequence[torch.Tensor]) -> None:
        self.fn([*self.chain.tensor_inputs(inputs, self.device), *outputs])  # Inductor's boxed call

    def run(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """Allocates the new outputs on the chain's device, runs the kernel and returns them."""
        outputs = [spec.empty(self.device) for spec in self.chain.output_specs()]
        self(inputs, outputs)
        return outputs

    @property
    def cache_hit(self) -> bool:
        return self.cache_counts.get("fxgraph_cache_hit", 0) > 0


def _counter_values() -> dict[str, int]:
    # Imported here: torch._dynamo loads Inductor (~1.5 s), which only a compile needs (fused
    # mode imports this module with torchneuron).
    # internal: see runtime/torch_internals.py "torch._dynamo.utils.counters"
    from torch._dynamo.utils import counters

    return {name: counters[group][name] for group, name in CACHE_COUNTERS}


def compile_chain(chain: Chain, threads: int | None = None, device: str = "cpu") -> CompiledChain:
    """Compiles `chain` for tensors of `device` ("cpu" or "neuron"; blocking: seconds on a miss,
    ~0.1 s from the disk cache). `threads`: the intra-op thread count the kernel is generated for
    (default: the caller's torch.get_num_threads()); it is part of the chain's signature."""
    device = check_device(device)
    if device == "neuron":
        # The Inductor backend torch.compile uses on neuron: its wrapper codegen launches the
        # kernels on the stream (launch_neuron) and makes the call one queued item.
        from ..compile import inductor

        inductor.register()
    threads = torch.get_num_threads() if threads is None else threads
    gm = build_graph(chain)
    # Static shapes: the signature holds sizes and strides. A ShapeEnv must exist all the same,
    # or Inductor bypasses its FX graph cache ("No shape env").
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    with fake_mode:
        examples = [spec.empty(device) for spec in chain.kernel_input_specs()]
        examples += [spec.empty(device) for spec in chain.output_specs()]
    before = _counter_values()
    start = time.perf_counter()
    fn = _inductor_compile(gm, examples, fake_mode, threads)
    seconds = time.perf_counter() - start
    after = _counter_values()
    delta = {name: after[name] - before[name] for name in after if after[name] != before[name]}
    return CompiledChain(chain, fn, threads, seconds, delta, device)


def _inductor_compile(gm: torch.fx.GraphModule, examples: list, fake_mode: FakeTensorMode,
                      threads: int) -> Callable[[list], Any]:
    """Inductor's compile of a graph that is already what AOTAutograd would hand it (functional
    steps, then a copy_ into each buffer or updated input): decomposed as Inductor decomposes,
    then compiled by compile_fx_inner. Skipping AOTAutograd (compile_fx) skips its runtime
    wrappers at every call: a 20-op chain on 16 floats costs ~11 us per call instead of ~17."""
    # internal: see runtime/torch_internals.py "torch._inductor.compile_fx.compile_fx_inner"
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner
    # internal: see runtime/torch_internals.py "torch._inductor.decomposition.select_decomp_table"
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    # cpp.threads, not torch.set_num_threads: the thread count is process-wide, and this may run
    # on a compile thread while the caller keeps working. Rounding float16/bfloat16 intermediates
    # as eager does keeps results within eager's tolerance (not just float32's).
    # internal: see runtime/torch_internals.py "torch._inductor.config.cpp.threads"
    patches = {"cpp.threads": threads, "emulate_precision_casts": True}
    with tracing(TracingContext(fake_mode)), inductor_config.patch(patches):
        with fake_mode:
            decomposed = make_fx(gm, decomposition_table=select_decomp_table())(*examples)
        with fused_tiling():
            return compile_fx_inner(decomposed, examples)
