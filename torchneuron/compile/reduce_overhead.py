"""`torch.compile(model, backend="neuron", mode="reduce-overhead")`: every graph Inductor compiles
(inference, forward, backward) is captured into a device graph (docs/device-graphs.md) per key of
its inputs' shapes, strides, dtypes and non-tensor values, and replayed.

CUDA's rules, as its reduce-overhead mode keeps them: the first call of a key runs the compiled
graph as it is (a warm-up); the second captures it; later calls copy their inputs into the
captured ones (parameters and buffers, and outputs of another captured graph such as the saved
activations a backward reads, stay where they are: no copy) and replay. Outputs are the captured
graph's own tensors, overwritten by its next replay, as with CUDA graphs: clone one to keep it
across calls. A recompile is a new compiled graph, so it gets graphs of its own.

A graph that mutates an input other than a parameter or buffer, or whose capture is refused (it
synchronizes with the host, reads a CPU tensor, ...), runs without a device graph, with one
warning naming the reason."""

from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable, Sequence

import torch

# The graphed callables alive: an input at the address of one of their captured outputs is
# another captured graph's output (a forward's saved activation read by its backward), at the
# same address at every replay, so it needs no copy. Weak: once a callable is gone (a recompile,
# torch._dynamo.reset()), its outputs' memory may hold anyone's tensor.
_live: weakref.WeakSet[GraphedCompiledGraph] = weakref.WeakSet()
_warned: set[str] = set()


def _captured_output(address: int) -> bool:
    return any(address in graphed.output_addresses for graphed in _live)


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"torch.compile(mode='reduce-overhead') on neuron: a graph runs without a "
                      f"device graph: {reason}", UserWarning, stacklevel=4)


def mutated_inputs(gm: torch.fx.GraphModule) -> set[int]:
    """The positions of the graph's inputs that an op of the graph writes in place."""
    placeholders = {node: i for i, node in
                    enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    written: set[int] = set()
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
        for arg, spec in zip(node.args, target._schema.arguments):
            if spec.alias_info is not None and spec.alias_info.is_write and arg in placeholders:
                written.add(placeholders[arg])
    return written


class _Captured:
    """One key's device graph: its outputs, and for each tensor input where the replay reads it:
    `copied` inputs go into a tensor of the graph's own before each replay, `kept` ones (parameters,
    buffers, another graph's outputs) were captured where they are."""

    def __init__(self) -> None:
        self.graph: torch.neuron.NeuronGraph | None = None
        self.copied: list[tuple[int, torch.Tensor]] = []
        self.kept: list[tuple[int, torch.Tensor, int]] = []  # (position, tensor, its address)
        self.outputs: Any = None
        self.failed = False


class GraphedCompiledGraph:
    """A compiled graph (Inductor's boxed calling convention: one list of inputs) replayed from a
    device graph per input key."""

    def __init__(self, compiled: Callable, static_inputs: Sequence[int]) -> None:
        # An instance attribute, as Inductor's compiled graphs carry it: AOTAutograd wraps a
        # backward in torch._dynamo.disable, whose functools.wraps copies only the instance's.
        self._boxed_call = True
        self.compiled = compiled
        self.static = frozenset(static_inputs)
        self.keys: dict[tuple, _Captured] = {}
        self.output_addresses: set[int] = set()  # of every key's captured outputs
        _live.add(self)

    def _key(self, args: Sequence[Any]) -> tuple:
        """What tells the graph's calls apart: the shapes, strides and dtypes of its inputs
        other than parameters and buffers (those are the same tensors at every call, Dynamo
        guards their metadata), and the values of its non-tensor inputs (symbolic sizes among
        them). Kept cheap: it runs at every call."""
        static = self.static
        return tuple((a.shape, a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a
                     for i, a in enumerate(args) if i not in static)

    def __call__(self, args: list) -> Any:
        key = self._key(args)
        captured = self.keys.get(key)
        if captured is None:  # the warm-up: lazy state is made outside any capture
            self.keys[key] = _Captured()
            return self.compiled(args)
        if captured.failed:
            return self.compiled(args)
        if captured.graph is None:
            self._capture(captured, args)
            if captured.failed:
                return self.compiled(args)
        else:
            for i, static in captured.copied:
                static.copy_(args[i])
            for i, static, address in captured.kept:
                # A parameter replaced since the capture (load_state_dict with assign=True):
                # its values go where the graph reads them.
                if args[i].data_ptr() != address:
                    static.copy_(args[i])
        args.clear()  # the boxed convention: the callee lets its inputs go
        captured.graph.replay()
        return captured.outputs

    def _capture(self, captured: _Captured, args: list) -> None:
        inputs = []
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                inputs.append(a)
            elif a.device.type != "neuron":
                captured.failed = True
                _warn_once(f"its input {i} is a tensor on {a.device}, not on neuron")
                return
            elif i in self.static or _captured_output(a.data_ptr()):
                inputs.append(a)
                captured.kept.append((i, a, a.data_ptr()))
            else:
                static = torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device)
                static.copy_(a)
                inputs.append(static)
                captured.copied.append((i, static))
        # torch.neuron, the device module (a layer beside this one), as it is found at run time
        g = torch.neuron.NeuronGraph()
        try:
            with torch.neuron.graph(g):
                outputs = self.compiled(list(inputs))
        except RuntimeError as e:
            if "cannot be captured in a neuron graph" not in str(e):
                raise
            captured.failed = True
            _warn_once(str(e).split(". Run it before")[0])
            return
        captured.graph, captured.outputs = g, outputs
        for t in outputs if isinstance(outputs, (list, tuple)) else (outputs,):
            if isinstance(t, torch.Tensor):
                self.output_addresses.add(t.data_ptr())


def graphed_inner_compile(inner_compile: Callable) -> Callable:
    """Inductor's inner compile, each graph it returns replayed from device graphs."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                      **kwargs: Any) -> Callable:
        compiled = inner_compile(gm, example_inputs, **kwargs)
        # internal: see runtime/torch_internals.py "compile_fx.compile_fx_inner" (the
        # static_input_idxs compile_fx passes: parameters and buffers)
        static = tuple(kwargs.get("static_input_idxs") or ())
        written = mutated_inputs(gm) - set(static)
        if written:
            _warn_once(f"it writes its inputs {sorted(written)} in place (only parameters and "
                       "buffers may be written)")
            return compiled
        return GraphedCompiledGraph(compiled, static)

    return compile_graph
