"""Device graphs, shaped like `torch.cuda.graphs`: `NeuronGraph` (torch.accelerator.Graph on
neuron, whose C++ implementation csrc/device/NeuronGraph.h registers), the `graph` context
manager, `graph_pool_handle`, `is_current_stream_capturing` and `make_graphed_callables`.

A capture records the work the capturing thread issues on neuron; `replay()` queues it again on
the current stream as one item, without Python, autograd or the launch decision. What must run at
the call (a host synchronization such as `.item()`, an op whose result sizes depend on its data)
cannot be captured: it raises at capture, naming the op and why. Random ops draw new numbers at
each replay, the numbers the same ops run eagerly would draw."""

from __future__ import annotations

import gc
from typing import Any, Callable

import torch
# internal: see runtime/torch_internals.py "torch.utils._pytree.arg_tree_leaves"
# internal: see runtime/torch_internals.py "torch.utils._pytree.tree_flatten"
from torch.utils import _pytree as pytree

from .._C import device as _device_c
from .._C import launch as _launch_c
from . import streams

__all__ = ["NeuronGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
           "make_graphed_callables"]

_POOL_HANDLE = tuple[int, int]


def is_current_stream_capturing() -> bool:
    """True while some thread captures a graph on the current stream of the current device."""
    return bool(_device_c.is_current_stream_capturing())


def graph_pool_handle() -> _POOL_HANDLE:
    """An opaque pool id to pass as `pool=` to several captures, as torch.cuda's."""
    return tuple(_device_c.graph_pool_handle())


# internal: see runtime/torch_internals.py "torch._C._acceleratorGraph"
class NeuronGraph(torch.accelerator.Graph):
    """A neuron graph: `torch.cuda.CUDAGraph`'s API (capture_begin, capture_end, replay, reset,
    pool, debug_dump) over torch.accelerator.Graph's neuron implementation.

    Memory: the tensors the capture read and made are the graph's static inputs and outputs
    (each replay reads and writes the same memory); the memory captured work uses stays the
    graph's, reused by every replay, until `reset()`. A pool shared between graphs is accepted
    as an id, but each graph keeps its own memory.

    `recorded_work()` says how much work the capture recorded (none: an empty graph)."""

    def __new__(cls, keep_graph: bool = False) -> NeuronGraph:
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False) -> None:
        super().__init__(keep_graph)
        self._capturing = False
        self._recorded = 0  # what the last capture recorded (the C++ capture's count at its end)

    def capture_begin(self, pool: _POOL_HANDLE | None = None,
                      capture_error_mode: str = "global") -> None:
        """Begins capturing the current thread's neuron work on the current stream, which must
        not be the default stream (use `torch.neuron.graph`, which captures on a side stream)."""
        torch._C._acceleratorGraph.capture_begin(self, pool=pool,
                                                 capture_error_mode=capture_error_mode)
        self._capturing = True

    def capture_end(self) -> None:
        """Ends the capture, on the stream it began on; warns if it recorded no device work."""
        recorded = _launch_c.captured_work()
        try:
            super().capture_end()
        finally:
            self._capturing = False
        self._recorded = recorded

    def reset(self) -> None:
        """Drops the captured work and returns its memory; the graph may capture again."""
        super().reset()
        self._recorded = 0

    def recorded_work(self) -> int:
        """How many pieces of device work the capture recorded (each op, copy or compiled
        kernel one): what `replay()` runs. 0 for an empty capture (one that ran no neuron work,
        which `capture_end` warns of), before a capture and after `reset()`. While this graph
        captures, asked on the capturing thread: the pieces recorded so far."""
        return _launch_c.captured_work() if self._capturing else self._recorded


class graph:
    """`with torch.neuron.graph(g):` captures the block's neuron work into `g`, on a side stream
    (or `stream`), after synchronizing and emptying the allocator's cache, as torch.cuda.graph."""

    default_capture_stream: torch.Stream | None = None

    def __init__(self, neuron_graph: NeuronGraph, pool: _POOL_HANDLE | None = None,
                 stream: torch.Stream | None = None,
                 capture_error_mode: str = "global") -> None:
        if not isinstance(neuron_graph, torch.accelerator.Graph):
            raise TypeError("torch.neuron.graph() takes a torch.neuron.NeuronGraph, got "
                            f"{type(neuron_graph).__name__}")
        # One side stream for every capture that names none, as torch.cuda.graph shares one.
        if self.__class__.default_capture_stream is None:
            self.__class__.default_capture_stream = streams.Stream()
        self.pool = () if pool is None else (pool,)
        self.capture_stream = stream if stream is not None else self.default_capture_stream
        self.stream_ctx = streams.stream(self.capture_stream)
        self.neuron_graph = neuron_graph
        self.capture_error_mode = capture_error_mode

    def __enter__(self) -> None:
        torch.neuron.synchronize()
        gc.collect()
        torch.neuron.empty_cache()
        self.stream_ctx.__enter__()
        try:
            self.neuron_graph.capture_begin(*self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)  # __exit__ does not run: leave the stream
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.neuron_graph.capture_end()
        finally:
            self.stream_ctx.__exit__(*exc_info)


def make_graphed_callables(callables: Any, sample_args: Any, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False,
                           pool: _POOL_HANDLE | None = None) -> Any:
    """Graphed versions of callables (modules or functions), as torch.cuda's: each callable's
    forward and backward are captured once (after `num_warmup_iters` eager runs on a side
    stream) and replayed at each call; autograd sees one op per callable. Sample arguments are
    tensors only; modules must have no hooks and no buffers that require grad; a module called
    in another training state than at capture runs its original forward."""
    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support the autocast caching. "
                           "Please set `cache_enabled=False`.")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    flat_args = []
    for c, args in zip(callables, sample_args):
        if isinstance(c, torch.nn.Module):
            # internal: see runtime/torch_internals.py "torch.nn.Module._forward_hooks / _forward_pre_hooks / _backward_hooks"
            if c._backward_hooks or c._forward_hooks or c._forward_pre_hooks:
                raise ValueError("Modules must not have hooks registered at the time they are "
                                 "passed to make_graphed_callables.")
            if any(b.requires_grad for b in c.buffers()):
                raise ValueError("In any torch.nn.Module passed to make_graphed_callables, only "
                                 "parameters may be trainable. All buffers must have "
                                 "requires_grad=False.")
        flat = tuple(pytree.arg_tree_leaves(*args))
        if not all(isinstance(a, torch.Tensor) for a in flat):
            raise TypeError("sample_args for each callable must contain only Tensors.")
        flat_args.append(flat)
    user_lens = [len(a) for a in flat_args]
    params = [tuple(c.parameters()) if isinstance(c, torch.nn.Module) else () for c in callables]
    surfaces = [flat_args[i] + params[i] for i in range(len(callables))]
    fwd_graphs = [NeuronGraph() for _ in callables]
    bwd_graphs = [NeuronGraph() for _ in callables]
    mempool = graph_pool_handle() if pool is None else pool

    def grads_of(outputs: tuple, surface: tuple, grad_outputs: tuple) -> tuple | None:
        wanted = tuple(o for o in outputs if o.requires_grad)
        if not wanted:
            return None
        return torch.autograd.grad(outputs=wanted,
                                   inputs=tuple(i for i in surface if i.requires_grad),
                                   grad_outputs=grad_outputs, only_inputs=True,
                                   allow_unused=allow_unused_input)

    # Warm-up on a side stream: every op's first call of its signature, lazy state (optimizer
    # slots, cached weights) made before the capture.
    torch.neuron.synchronize()
    with streams.stream(streams.Stream()):
        for func, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs = tuple(pytree.tree_leaves(func(*args)))
                grads_of(outputs, surface,
                         tuple(torch.empty_like(o) for o in outputs if o.requires_grad))
            del outputs
    torch.neuron.synchronize()

    static_outputs, output_specs = [], []
    for func, args, fwd_graph in zip(callables, sample_args, fwd_graphs):
        with graph(fwd_graph, pool=mempool):
            out = func(*args)
        flat, spec = pytree.tree_flatten(out)
        static_outputs.append(tuple(flat))
        output_specs.append(spec)

    # Backward graphs in reverse order, as autograd would run them.
    static_grad_outputs, static_grad_inputs = [], []
    for surface, outputs, bwd_graph in zip(reversed(surfaces), reversed(static_outputs),
                                           reversed(bwd_graphs)):
        grad_outs = tuple(torch.empty_like(o) if o.requires_grad else None for o in outputs)
        grad_inputs = None
        if any(o.requires_grad for o in outputs):
            with graph(bwd_graph, pool=mempool):
                grad_inputs = grads_of(outputs, surface,
                                       tuple(g for g in grad_outs if g is not None))
        per_input, k = [], 0
        for arg in surface:
            if arg.requires_grad and grad_inputs is not None:
                per_input.append(grad_inputs[k])
                k += 1
            else:
                per_input.append(None)
        static_grad_outputs.append(grad_outs)
        static_grad_inputs.append(tuple(per_input))
    static_grad_outputs.reverse()
    static_grad_inputs.reverse()

    graphed = []
    for i, func in enumerate(callables):
        fn = _graphed_function(fwd_graphs[i], bwd_graphs[i], params[i], user_lens[i],
                               output_specs[i], surfaces[i], static_outputs[i],
                               static_grad_outputs[i], static_grad_inputs[i])
        if isinstance(func, torch.nn.Module):
            func.forward = _graphed_forward(func, func.training, fn, func.forward)
            graphed.append(func)
        else:
            graphed.append(fn)
    return graphed[0] if just_one else tuple(graphed)


def _graphed_function(fwd_graph: NeuronGraph, bwd_graph: NeuronGraph, params: tuple,
                      user_len: int, output_spec: Any, surface: tuple, static_outputs: tuple,
                      static_grad_outputs: tuple, static_grad_inputs: tuple) -> Callable:
    """One callable's replays as one autograd op: inputs copied into the static ones, then the
    forward graph; incoming gradients copied into the static ones, then the backward graph."""

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: torch.Tensor) -> tuple:
            for static, given in zip(surface[:user_len], inputs[:user_len]):
                if static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            fwd_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
            for static, given in zip(static_grad_outputs, grads):
                if static is not None and static.data_ptr() != given.data_ptr():
                    static.copy_(given)
            bwd_graph.replay()
            return tuple(g.detach() if g is not None else None for g in static_grad_inputs)

    def functionalized(*user_args: Any) -> Any:
        flat = tuple(pytree.arg_tree_leaves(*user_args))
        return pytree.tree_unflatten(Graphed.apply(*(flat + params)), output_spec)

    return functionalized


def _graphed_forward(module: torch.nn.Module, training: bool, graphed: Callable,
                     original: Callable) -> Callable:
    def forward(*user_args: Any) -> Any:
        return graphed(*user_args) if module.training == training else original(*user_args)

    return forward
