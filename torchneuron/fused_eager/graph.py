"""A chain as an FX graph for Inductor: the tensor inputs and runtime scalars (0-d float64
tensors), then one placeholder per new output buffer, the steps, and a copy_ of each output's
result into its buffer (or into the input it updates). Inductor turns a copy_ into a graph input
into a store in the fused loop, so results go straight into the memory the queue allocated at the
call and intermediates are never stored."""

from __future__ import annotations

import torch

from . import runtime_scalars
from .chain import Chain, InputRef, RuntimeScalar, TensorSpec

aten = torch.ops.aten


def build_graph(chain: Chain) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    inputs: list = [graph.placeholder(f"in{i}")
                    if isinstance(spec, (TensorSpec, RuntimeScalar)) else None
                    for i, spec in enumerate(chain.inputs)]
    buffers = [graph.placeholder(f"out{k}") for k in range(len(chain.output_specs()))]
    results: list = []
    for step in chain.steps:
        args = tuple(_resolve(chain, a, inputs, results) for a in step.args)
        kwargs = {k: _resolve(chain, v, inputs, results) for k, v in step.kwargs}
        results.append(_call(graph, chain, step, args, kwargs))
    new_buffers = iter(buffers)
    for output in chain.outputs:
        if output.into_input is None:
            target = next(new_buffers)
        else:
            _check_fits(chain, output.step, output.into_input)
            target = inputs[output.into_input]
        graph.call_function(aten.copy_.default, (target, results[output.step]))
    graph.output(())
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _resolve(chain: Chain, value, inputs: list, results: list):
    # A runtime scalar is its placeholder (a 0-d float64 tensor), not its value.
    if _is_runtime_scalar(chain, value):
        return inputs[value.index]
    return chain.resolve(value, inputs, results)


def _is_runtime_scalar(chain: Chain, value) -> bool:
    return isinstance(value, InputRef) and isinstance(chain.inputs[value.index], RuntimeScalar)


def _call(graph: torch.fx.Graph, chain: Chain, step, args: tuple, kwargs: dict):
    """The step's node; an op given a runtime scalar at its Scalar-typed argument is written in
    its form with that argument as a tensor (fused_eager/runtime_scalars.py)."""
    # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
    schema = step.op._schema.arguments
    given = dict(step.kwargs)
    raw = [step.args[i] if i < len(step.args) else given.get(a.name) for i, a in enumerate(schema)]
    scalar_typed = [i for i, a in enumerate(schema)
                    if _is_runtime_scalar(chain, raw[i]) and not _tensor_typed(a)]
    if not scalar_typed:
        return graph.call_function(step.op, args, kwargs)
    if scalar_typed != [runtime_scalars.argument_position(step.op)]:
        raise ValueError(f"{step.op} takes a runtime scalar at a Scalar-typed argument that "
                         f"fused_eager/runtime_scalars.py has no tensor form for")
    values = [args[i] if i < len(args) else kwargs.get(a.name, a.default_value)
              for i, a in enumerate(schema)]
    form = runtime_scalars.tensor_form(step.op)
    return form(lambda op, *a, **k: graph.call_function(op, a, k), *values)


def _tensor_typed(argument) -> bool:
    kind = argument.type
    if isinstance(kind, torch.OptionalType):
        kind = kind.getElementType()
    return isinstance(kind, torch.TensorType)


def _check_fits(chain: Chain, step: int, into_input: int) -> None:
    result, target = chain.step_specs[step], chain.inputs[into_input]
    if result.size != target.size:
        raise ValueError(f"step {step}'s result has shape {list(result.size)} and cannot be "
                         f"written into input {into_input} of shape {list(target.size)}")
