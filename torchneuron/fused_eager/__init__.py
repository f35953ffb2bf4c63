"""Fused eager's Python side (its C++ side, the queue that holds chains, is csrc/fused_eager/):
describes a chain of queued pointwise ops (and a reduction that may end it), asks what may fuse,
compiles hot chains with Inductor's C++ code generation off the
caller's thread and caches them on disk. The execution queue (csrc/fused_eager/FusedEager.h) hands
chains over.

- `ops.py`: what may fuse, asked of the one rule the execution queue applies
  (csrc/fused_eager/FusibleOps.h).
- `chain.py`: a chain of queued ops as the queue hands it over (inputs, steps, outputs) and its
  signature.
- `runtime_scalars.py`: floats a fused kernel reads at each call instead of compiling them in.
- `graph.py`: a chain as an FX graph for Inductor, writing results into the queue's buffers.
- `compiler.py`: compiles a chain with Inductor's C++ code generation for "cpu" or "neuron".
- `policy.py`: when a chain is compiled (once hot, NEURON_FUSION_HOT, on a background thread).
- `queue_feeder.py`: fused eager's compile thread, fed by the execution queue's requests.
- `thread_scoped_patch.py`: a patch of a PyTorch function active only on threads inside its
  block.
- `background_rng.py`: the compile thread leaves the caller's random state alone.
- `vector_interleave.py`: fused kernels step several SIMD vectors per loop step."""

from .chain import (Chain, Input, InputRef, Output, RuntimeScalar, Scalar, Step, StepRef,
                    TensorSpec)
from .compiler import CompiledChain, compile_chain
from .ops import UnfusibleOpError, fusion_enabled, is_fusible, is_pointwise, is_reduction
from .policy import ChainCache, default_cache, lookup, stats, wait_for_compiles

__all__ = [
    "Chain", "ChainCache", "CompiledChain", "Input", "InputRef", "Output",
    "RuntimeScalar", "Scalar", "Step", "StepRef", "TensorSpec", "UnfusibleOpError", "compile_chain", "default_cache",
    "fusion_enabled", "is_fusible", "is_pointwise", "is_reduction", "lookup",
    "stats", "wait_for_compiles",
]
