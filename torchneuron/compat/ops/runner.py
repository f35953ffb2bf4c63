"""Runs one unit of the op battery (one OpInfo, one dtype) in the current process: each sample,
built on CPU from a fixed seed, runs on CPU and on neuron in four variants (forward, backward,
in-place, out=), and each (sample, variant) case becomes one record. Cases are numbered
sample * len(VARIANTS) + variant, so a worker that crashed can resume after the crashing case."""

from __future__ import annotations

import unittest
import warnings
from typing import Callable

import torch

from ..judge import Mismatch, compare, flatten
from .cases import VARIANTS, Unit, tolerances, to_device, values_comparable

DEVICE = "neuron"
SEED = 0
# The float64 policy's error says this (csrc/ops/DtypePolicy.cpp). A case it stops is "skipped by
# policy" whatever the unit's dtype: softmax(x, dtype=torch.float64) computes in float64 too.
POLICY_MARK = "has no float64 arithmetic"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


def _call(op, sample, **extra):
    return op(sample.input, *sample.args, **sample.kwargs, **extra)


def _run(fn: Callable):
    """(result, exception): one side of a case, seeded so random ops draw the same stream."""
    torch.manual_seed(SEED)
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - recording every failure is the point
        return None, e


def describe(obj) -> str:
    """A sample in a line: each tensor as layout, dtype and shape, other values by repr."""
    if isinstance(obj, torch.Tensor):
        layout = "" if obj.layout == torch.strided else str(obj.layout).removeprefix("torch.") + " "
        grad = " requires_grad" if obj.requires_grad else ""
        return f"{layout}{str(obj.dtype).removeprefix('torch.')}{list(obj.shape)}{grad}"
    if type(obj) in (list, tuple):
        inner = ", ".join(describe(x) for x in obj)
        return f"[{inner}]" if isinstance(obj, list) else f"({inner})"
    if type(obj) is dict:
        return "{" + ", ".join(f"{k}={describe(v)}" for k, v in obj.items()) + "}"
    return repr(obj)[:40]


def describe_sample(unit: Unit, index: int, dbs: dict[str, list]) -> str:
    """Sample `index` of a unit, built again on CPU as the worker built it: how a crash record
    names the sample that ended its worker."""
    runner = UnitRunner(dbs[unit.db][unit.index], unit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = runner.samples()
    sample = samples[index]
    text = describe(sample.input)
    if sample.args:
        text += ", args " + describe(tuple(sample.args))
    if sample.kwargs:
        text += ", kwargs " + describe(dict(sample.kwargs))
    return text[:300]


class _Sample:
    """input/args/kwargs triple that _call accepts, built from parts."""

    def __init__(self, input, args, kwargs, output_process_fn_grad=lambda x: x):
        self.input, self.args, self.kwargs = input, args, kwargs
        self.output_process_fn_grad = output_process_fn_grad


def _detached(obj, clone: bool):
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        return t.clone() if clone else t
    if type(obj) in (list, tuple):
        return type(obj)(_detached(x, clone) for x in obj)
    if type(obj) is dict:
        return {k: _detached(v, clone) for k, v in obj.items()}
    return obj


def _no_grad_sample(sample, clone_input: bool) -> _Sample:
    return _Sample(_detached(sample.input, clone_input), _detached(sample.args, False),
                   _detached(sample.kwargs, False))


def _on_neuron(sample) -> bool:
    """Whether a sample holds a neuron tensor or names the neuron device: if not, the op runs
    on CPU on both sides (`torch.arange(3)`), as it would in a CUDA program."""
    return any((isinstance(x, torch.Tensor) and x.device.type == DEVICE)
               or (isinstance(x, torch.device) and x.type == DEVICE) or x == DEVICE
               for _, x in flatten((sample.input, sample.args, sample.kwargs))
               if isinstance(x, (torch.Tensor, torch.device, str)))


def _grad_inputs(sample) -> list[torch.Tensor]:
    return [t for _, t in flatten((sample.input, sample.args, sample.kwargs))
            if isinstance(t, torch.Tensor) and t.requires_grad]


def _grad_outputs(result, sample) -> list[torch.Tensor]:
    return [t for _, t in flatten(sample.output_process_fn_grad(result))
            if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.is_floating_point() or t.is_complex())]


class UnitRunner:
    def __init__(self, op, unit: Unit, variants=VARIANTS):
        self.op, self.unit = op, unit
        self.dtype = getattr(torch, unit.dtype)
        self.variants = variants
        self.atol, self.rtol = tolerances(op, self.dtype)
        self.exact_values = values_comparable(op, self.dtype)
        self.grad = ("backward" in variants and op.supports_autograd
                     and self.dtype in op.supported_backward_dtypes("cpu"))

    def samples(self) -> list:
        torch.manual_seed(SEED)
        if self.unit.layout == "strided":
            return list(self.op.sample_inputs("cpu", self.dtype, requires_grad=self.grad))
        layout = getattr(torch, self.unit.layout)
        try:
            return list(self.op.sample_inputs_sparse(layout, "cpu", self.dtype,
                                                     requires_grad=self.grad))
        except unittest.SkipTest:  # "NO SAMPLES!": the OpInfo has none for this dtype
            return []
        except NotImplementedError as e:
            # The OpInfo sets the layout's flag without a sample function for it: nothing to run.
            if "no sample function specified" in str(e):
                return []
            raise

    def run(self, start: int, begin: Callable[[int], None],
            end: Callable[[int, dict | None], None]):
        """Runs the cases numbered >= start; calls begin(case) before each and end(case, record)
        after. A case that does not apply to the op (no in-place variant, ...) has no record."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                samples = self.samples()
            except Exception as e:  # noqa: BLE001
                end(start, {"case": start, "sample": -1, "variant": "forward",
                            "status": "sample_error", "type": type(e).__name__,
                            "message": first_line(e)})
                return
            n = len(VARIANTS)
            for i, sample in enumerate(samples):
                if (i + 1) * n <= start:
                    continue
                try:
                    neuron_sample = _Sample(*to_device((sample.input, sample.args,
                                                        sample.kwargs), DEVICE),
                                            sample.output_process_fn_grad)
                except Exception as e:  # noqa: BLE001
                    # A sample that cannot be moved is this sample's failure, not the OpInfo's
                    # (whose other samples still run): "could not build samples" hid a real
                    # view of a complex window that the copy misplaced (cases._moved_tensor).
                    case = i * n
                    if case >= start:
                        begin(case)
                        end(case, {"case": case, "sample": i, "variant": "forward",
                                   "status": "error", "type": type(e).__name__,
                                   "message": "moving the sample to neuron: " + first_line(e)})
                    continue
                cache: dict = {}
                for v, variant in enumerate(VARIANTS):
                    case = i * n + v
                    if case < start or variant not in self.variants:
                        continue
                    step = getattr(self, "_" + variant)
                    begin(case)
                    rec = step(sample, neuron_sample, cache)
                    if rec is not None:
                        rec.update(case=case, sample=i, variant=variant)
                    end(case, rec)

    # --- judging one case ---------------------------------------------------------------

    def _judge(self, cpu, cpu_exc, neuron, neuron_exc, device=DEVICE) -> dict:
        if cpu_exc is not None:
            # Neuron may stop earlier, at the float64 policy: the CPU rejects the case anyway.
            if neuron_exc is not None and (type(neuron_exc) is type(cpu_exc)
                                           or POLICY_MARK in str(neuron_exc)):
                return {"status": "cpu_error", "type": type(cpu_exc).__name__,
                        "message": first_line(cpu_exc)}
            got = (f"neuron raised {type(neuron_exc).__name__}: {first_line(neuron_exc)}"
                   if neuron_exc is not None else "neuron did not raise")
            return {"status": "error", "type": "ErrorMismatch",
                    "message": f"CPU raised {type(cpu_exc).__name__}: {first_line(cpu_exc)}; "
                               f"{got}"}
        if neuron_exc is not None:
            message = first_line(neuron_exc)
            status = "skipped_policy" if POLICY_MARK in str(neuron_exc) else "error"
            return {"status": status, "type": type(neuron_exc).__name__, "message": message}
        try:
            compare(neuron, cpu, self.atol, self.rtol, device=device)
        except Mismatch as m:
            if self.exact_values:
                return {"status": "mismatch", "message": str(m)[:300],
                        "max_error": m.max_error}
            try:  # random or undefined values: the OpInfo itself does not compare them
                compare(neuron, cpu, self.atol, self.rtol, values=False, device=device)
            except Mismatch as m2:
                return {"status": "mismatch", "message": str(m2)[:300]}
            return {"status": "pass", "compared": "metadata"}
        except Exception as e:  # noqa: BLE001 - e.g. copying a broken result to CPU
            return {"status": "error", "type": type(e).__name__,
                    "message": "comparing results: " + first_line(e)}
        return {"status": "pass"}

    # --- the variants -------------------------------------------------------------------

    def _forward(self, sample, neuron_sample, cache):
        cpu, cpu_exc = _run(lambda: _call(self.op, sample))
        neuron, neuron_exc = _run(lambda: _call(self.op, neuron_sample))
        cache["forward"] = (cpu, cpu_exc, neuron, neuron_exc)
        return self._judge(sample.output_process_fn_grad(cpu) if cpu_exc is None else None,
                           cpu_exc,
                           neuron_sample.output_process_fn_grad(neuron)
                           if neuron_exc is None else None, neuron_exc,
                           DEVICE if _on_neuron(neuron_sample) else "cpu")

    def _backward(self, sample, neuron_sample, cache):
        if not self.grad:
            return None
        if "forward" not in cache:  # resumed after a crash in this sample's forward case
            self._forward(sample, neuron_sample, cache)
        cpu, cpu_exc, neuron, neuron_exc = cache["forward"]
        if cpu_exc is not None:
            return None  # counted once, as the forward case's cpu_error
        cpu_outs = _grad_outputs(cpu, sample)
        cpu_ins = _grad_inputs(sample)
        if not cpu_outs or not cpu_ins:
            return None
        torch.manual_seed(SEED + 1)
        grad_outs = [torch.randn_like(t) for t in cpu_outs]
        cpu_grads, cpu_exc = _run(lambda: torch.autograd.grad(
            cpu_outs, cpu_ins, grad_outs, allow_unused=True))
        if neuron_exc is not None:
            neuron_grads, neuron_exc = None, RuntimeError(
                f"forward failed: {type(neuron_exc).__name__}: {first_line(neuron_exc)}")
        else:
            neuron_grads, neuron_exc = _run(lambda: torch.autograd.grad(
                _grad_outputs(neuron, neuron_sample), _grad_inputs(neuron_sample),
                [g.to(o.device) for g, o in zip(grad_outs, _grad_outputs(neuron, neuron_sample))],
                allow_unused=True))
        return self._judge(cpu_grads, cpu_exc, neuron_grads, neuron_exc)

    def _inplace(self, sample, neuron_sample, cache):
        fn = self.op.inplace_variant
        if fn is None:
            return None

        def side(s):
            def go():
                with torch.no_grad():
                    t = _no_grad_sample(s, clone_input=True)
                    result = fn(t.input, *t.args, **t.kwargs)
                    # In-place ops return their input itself (None for foreach ops).
                    return (result is t.input, t.input) if result is not None else (None, t.input)
            return _run(go)

        return self._judge(*side(sample), *side(neuron_sample))

    def _out(self, sample, neuron_sample, cache):
        if not self.op.supports_out:
            return None
        if "forward" in cache:
            cpu, cpu_exc = cache["forward"][:2]
        else:  # resumed after a crash in this sample's earlier cases
            with torch.no_grad():
                cpu, cpu_exc = _run(lambda: _call(self.op, _no_grad_sample(sample, False)))
        if cpu_exc is not None:
            return None  # counted once, as the forward case's cpu_error
        if isinstance(cpu, torch.Tensor):
            shape = cpu
        elif isinstance(cpu, tuple) and cpu and all(isinstance(t, torch.Tensor) for t in cpu):
            shape = tuple(cpu)
        else:
            return None

        def side(s, device):
            # Zero-size out= tensors: the kernel must resize them, as most callers rely on.
            def go():
                with torch.no_grad():
                    out = (torch.empty(0, dtype=shape.dtype, device=device)
                           if isinstance(shape, torch.Tensor) else
                           tuple(torch.empty(0, dtype=t.dtype, device=device) for t in shape))
                    result = _call(self.op, _no_grad_sample(s, False), out=out)
                    return result, out
            return _run(go)

        return self._judge(*side(sample, "cpu"), *side(neuron_sample, DEVICE))
