"""Fused eager's compile thread (NEURON_EAGER_MODE=fused). The execution queue holds consecutive
pointwise ops back and counts each chain's signature (csrc/fused_eager/FusedEager.h); when one is hot it
describes the chain in a request. This thread waits for requests (without the GIL), builds the
chain, compiles it for neuron with Inductor (compile_chain: from Inductor's disk cache when an
earlier process compiled it) and records the generated wrapper's kernel calls, which the queue
then replays for every later occurrence of the chain without Python. A chain that does not
compile, or whose wrapper does more than call its kernels, stays unfused; stats() says why."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import torch

from .._C import fused_eager as _fused_eager_c
from .chain import Chain, InputRef, Output, RuntimeScalar, Scalar, Step, StepRef, TensorSpec
from .background_rng import compiling_in_background
from .compiler import compile_chain

log = logging.getLogger(__name__)

_thread: threading.Thread | None = None
_lock = threading.Lock()
# What the compiles of this process cost and what Inductor's disk cache answered them.
_compiles = {"compiled": 0, "compile_seconds": 0.0, "fxgraph_cache_hit": 0,
             "fxgraph_cache_miss": 0}


def configure(eager_mode: str, hot: int) -> None:
    """Called with the configuration in fused mode (the eager mode itself is set in the launch
    decision, csrc/aten/Launch.h): how soon a chain is compiled, and the compile thread. What
    chains may hold is the rule's (ops.py), configured when this package is imported."""
    _fused_eager_c.configure(hot)
    if eager_mode == "fused":
        start()


def start() -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="neuron-fusion-compile", daemon=True)
            _thread.start()


def _forget_thread() -> None:  # a forked child has no compile thread; it starts one when asked
    global _thread, _lock
    _thread, _lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_thread)


def _serve() -> None:
    while True:
        request = _fused_eager_c.next_request()
        serve(request)


def serve(request: tuple) -> str | None:
    """Compiles and installs one request; returns None, or why the chain stays unfused."""
    request_id = request[0]
    try:
        chain, buffers = chain_of(request)
        with compiling_in_background():
            compiled = compile_chain(chain, threads=request[1], device="neuron")
        _compiles["compiled"] += 1
        _compiles["compile_seconds"] += compiled.compile_seconds
        for name in ("fxgraph_cache_hit", "fxgraph_cache_miss"):
            _compiles[name] += compiled.cache_counts.get(name, 0)
        tensors = [spec.empty("neuron") for spec in chain.kernel_input_specs()]
        tensors += [spec.empty("neuron") for spec in buffers]
        why = _fused_eager_c.install(request_id, compiled.fn, tensors)
    except Exception as e:  # noqa: BLE001 - a chain that does not compile runs unfused
        why = f"{type(e).__name__}: {e}"
        _fused_eager_c.fail(request_id, why)
    if why is not None:
        log.debug("neuron fusion: chain %d stays unfused: %s", request_id, why)
    return why


def _op(name: str, overload: str) -> Any:
    namespace, _, op_name = name.partition("::")
    return getattr(getattr(getattr(torch.ops, namespace), op_name), overload)


def chain_of(request: tuple) -> tuple[Chain, list[TensorSpec]]:
    """The request as a Chain, and the layouts of the buffers the queue passes for its outputs
    (the ones the caller's results already have)."""
    _, _, inputs, steps, outputs = request
    specs = []
    for item in inputs:
        if item[0] == "scalar":
            specs.append(Scalar(item[1]))
        elif item[0] == "runtime":
            specs.append(RuntimeScalar(item[1]))
        else:
            specs.append(TensorSpec(item[1], item[2], item[3]))
    chain_steps = []
    for name, overload, args in steps:
        op = _op(name, overload)
        positional, kwargs = [], {}
        # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
        for argument, (kind, value) in zip(op._schema.arguments, args):
            value = InputRef(value) if kind == "input" else StepRef(value) if kind == "step" \
                else value
            if argument.kwarg_only:
                kwargs[argument.name] = value
            else:
                positional.append(value)
        chain_steps.append(Step(op, tuple(positional), kwargs))
    chain = Chain(tuple(specs), tuple(chain_steps),
                  tuple(Output(step, into) for step, into, _ in outputs))
    buffers = [TensorSpec(*layout) for _, into, layout in outputs if into is None]
    expected = [(s.dtype, s.size, s.stride) for s in chain.output_specs()]
    given = [(s.dtype, s.size, s.stride) for s in buffers]
    if expected != given:
        raise ValueError(f"the chain's results would be laid out as {expected}; the queue's "
                         f"buffers are {given}")
    return chain, buffers


def stats() -> dict:
    """What the queue held and fused in this process: ops held back, chains handed over and how
    many ran as one kernel, intermediate results never written, chains left unfused because
    their floats change between calls, ops held right now (held_now), signatures seen, hot,
    compiled and refused (with the first reasons); the compiles' seconds and what Inductor's disk
    cache answered them."""
    return {**_fused_eager_c.stats(), **_compiles}


def wait(timeout: float | None = None) -> bool:
    """Waits until every hot chain was compiled or refused; False if `timeout` passed first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        s = _fused_eager_c.stats()
        if s["requested"] <= s["ready"] + s["failed"]:
            return True
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(0.01)


def reset() -> None:
    """Forgets every chain signature and count (the next chains start cold)."""
    _fused_eager_c.reset()
