"""The Dynamo backend `neuron`: `torch.compile(model, backend="neuron")`.

It is Inductor with neuron's kernel generation (inductor.py), plus what the compile modes mean
on neuron. The "cudagraphs" part of reduce-overhead and max-autotune (Inductor's
`triton.cudagraphs`) captures each compiled graph into neuron device graphs (reduce_overhead.py);
Inductor's GEMM templates are generated for CPU tensors only, so that part of max-autotune is
dropped with one warning."""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Sequence

import torch
# internal: see runtime/torch_internals.py "config options and modes"
# internal: see runtime/torch_internals.py "compile_fx.compile_fx"
from torch._inductor import config as inductor_config
from torch._inductor import list_mode_options
# internal: see runtime/torch_internals.py "compile_fx.compile_fx_inner"
from torch._inductor.compile_fx import compile_fx, compile_fx_inner

from ..runtime import activity
from . import inductor, reduce_overhead

# What each mode keeps and loses on neuron: the option Inductor would set, and why it is dropped.
# "triton.cudagraphs" is not dropped: it means device graphs (_GRAPH_OPTION).
_GRAPH_OPTION = "triton.cudagraphs"
_DROPPED_OPTIONS = {
    "cpp_wrapper": "the C++ wrapper needs an AOTInductor runtime header that exists only for "
                   "built-in devices, so the Python wrapper calls the fused C++ kernels",
}
_NO_GEMM_TEMPLATES = ("Inductor's C++ GEMM templates are generated for CPU tensors only, so "
                      "matmuls keep the kernels of the default mode (oneDNN or ATen, see "
                      "onednn_gemm.py) and convolutions their ATen kernel")
_MODE_NOTES = {"max-autotune": _NO_GEMM_TEMPLATES,
               "max-autotune-no-cudagraphs": _NO_GEMM_TEMPLATES}
_warned_modes: set[str] = set()


def _warn_once(mode: str, reasons: list[str]) -> None:
    if mode in _warned_modes or not reasons:
        return
    _warned_modes.add(mode)
    warnings.warn(f"torch.compile(mode={mode!r}) on neuron: " + "; ".join(reasons) + ". The "
                  "graph is still compiled to fused neuron kernels.", UserWarning, stacklevel=3)


def config_for(mode: str | None, options: dict[str, Any] | None) -> dict[str, Any]:
    """Inductor config patches for `mode` and `options` on neuron (raises on unknown ones).
    `triton.cudagraphs` stays in them: neuron_backend reads it to capture device graphs, and
    Inductor itself never acts on it for a device that is not CUDA."""
    patches: dict[str, Any] = {}
    reasons: list[str] = []
    if mode is not None and mode != "default":
        known = list_mode_options()
        if mode not in known:
            raise ValueError(f"torch.compile(backend='neuron'): unknown mode {mode!r}; "
                             f"expected one of {', '.join(known)}")
        for key, value in known[mode].items():
            if key in _DROPPED_OPTIONS and value:
                reasons.append(_DROPPED_OPTIONS[key])
            else:
                patches[key] = value
        if mode in _MODE_NOTES:
            reasons.append(_MODE_NOTES[mode])
        _warn_once(mode, reasons)
    known_options = inductor_config.get_config_copy()
    for key, value in (options or {}).items():
        name = key.replace("-", "_")
        if name not in known_options:
            raise ValueError(f"torch.compile(backend='neuron'): unknown option {key!r} "
                             "(options are Inductor's, see torch._inductor.list_options())")
        if name in _DROPPED_OPTIONS and value:
            _warn_once(f"options[{key!r}]", [_DROPPED_OPTIONS[name]])
            continue
        patches[name] = value
    return patches


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], *,
                   mode: str | None = None, options: dict[str, Any] | None = None) -> Callable:
    """Dynamo backend: compile the captured graph with Inductor into neuron kernels."""
    inductor.register()
    patches = config_for(mode, options)
    graphed = bool(patches.pop(_GRAPH_OPTION, False))
    if graphed:
        # AOTAutograd's cache would answer a warm graph with Inductor's compiled graphs, without
        # asking the inner compile that wraps them in device graphs; the FX graph cache inside
        # compile_fx_inner still spares the compile.
        # internal: see runtime/torch_internals.py "torch._functorch.config.enable_autograd_cache"
        with torch._functorch.config.patch(enable_autograd_cache=False):
            compiled = compile_fx(gm, example_inputs, config_patches=patches,
                                  inner_compile=reduce_overhead.graphed_inner_compile(
                                      compile_fx_inner))
    else:
        compiled = compile_fx(gm, example_inputs, config_patches=patches)
    graph_name = f"compiled_graph ({len(gm.graph.nodes)} nodes)"

    @functools.wraps(compiled)  # keeps what Dynamo reads on it (_boxed_call)
    def run(*args):  # one device activity per graph call (its extern kernels nest in it)
        return activity.run_recorded(graph_name, lambda: compiled(*args), args)

    return run
