"""Fused eager's compiler: describes a chain of queued pointwise ops (and a reduction that may end
it), decides what may fuse, compiles hot chains with Inductor's C++ code generation off the
caller's thread and caches them on disk. The execution queue (csrc/device) hands chains over.
"""

from .chain import (Chain, Input, InputRef, Output, RuntimeScalar, Scalar, Step, StepRef,
                    TensorSpec)
from .compiler import CompiledChain, compile_chain
from .ops import UnfusibleOpError, fusion_enabled, is_fusible, is_pointwise, is_reduction
from .policy import ChainCache, default_cache, lookup, stats, wait_for_compiles
from .split import QueuedOp, split_chains

__all__ = [
    "Chain", "ChainCache", "CompiledChain", "Input", "InputRef", "Output", "QueuedOp",
    "RuntimeScalar", "Scalar", "Step", "StepRef", "TensorSpec", "UnfusibleOpError", "compile_chain", "default_cache",
    "fusion_enabled", "is_fusible", "is_pointwise", "is_reduction", "lookup", "split_chains",
    "stats", "wait_for_compiles",
]
