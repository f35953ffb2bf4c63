"""A chain as an FX graph for Inductor: the tensor inputs, then one placeholder per new output
buffer, the steps, and a copy_ of each output's result into its buffer (or into the input it
updates). Inductor turns a copy_ into a graph input into a store in the fused loop, so results go
straight into the memory the queue allocated at the call and intermediates are never stored."""

from __future__ import annotations

import torch

from .chain import Chain, TensorSpec

aten = torch.ops.aten


def build_graph(chain: Chain) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    inputs: list = [graph.placeholder(f"in{i}") if isinstance(spec, TensorSpec) else None
                    for i, spec in enumerate(chain.inputs)]
    buffers = [graph.placeholder(f"out{k}") for k in range(len(chain.output_specs()))]
    results: list = []
    for step in chain.steps:
        args = tuple(chain.resolve(a, inputs, results) for a in step.args)
        kwargs = {k: chain.resolve(v, inputs, results) for k, v in step.kwargs}
        results.append(graph.call_function(step.op, args, kwargs))
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


def _check_fits(chain: Chain, step: int, into_input: int) -> None:
    result, target = chain.step_specs[step], chain.inputs[into_input]
    if result.size != target.size:
        raise ValueError(f"step {step}'s result has shape {list(result.size)} and cannot be "
                         f"written into input {into_input} of shape {list(target.size)}")
