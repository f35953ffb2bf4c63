"""A chain of queued ops, as the execution queue hands it to the fuser: external inputs (tensors
described by their metadata, or Python scalars), steps (an aten OpOverload whose arguments refer
to inputs, earlier steps' results or constants) and the step results that must be written out.
Results that are not outputs are intermediates: the fused kernel never writes them to memory.

A chain's signature is its compile-cache key: hashable, the same in every process (op names,
dtypes, sizes, strides, storage offsets, constants and scalar values, and the intra-op thread
count the kernel is generated for)."""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import torch
# internal: see runtime/torch_internals.py "torch._subclasses.fake_tensor.FakeTensorMode"
from torch._subclasses.fake_tensor import FakeTensorMode

from .ops import UnfusibleOpError, check_fusible, is_reduction

SIGNATURE_VERSION = 1  # bump when the signature's layout changes
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, torch.dtype, torch.memory_format)


@dataclass(frozen=True)
class TensorSpec:
    """A tensor input or result by its metadata (the queue knows it at the call)."""
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", tuple(int(s) for s in self.size))
        object.__setattr__(self, "stride", tuple(int(s) for s in self.stride))
        if len(self.size) != len(self.stride):
            raise ValueError(f"TensorSpec: size {self.size} and stride {self.stride} differ in "
                             f"length")

    @classmethod
    def of(cls, tensor: torch.Tensor) -> TensorSpec:
        return cls(tensor.dtype, tuple(tensor.shape), tuple(tensor.stride()),
                   tensor.storage_offset())

    def extent(self) -> int:
        """Elements of storage the tensor spans from its offset."""
        if any(s == 0 for s in self.size):
            return 0
        return 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))

    def empty(self, device: str = "cpu") -> torch.Tensor:
        """A tensor of this layout (a fake one under a FakeTensorMode)."""
        base = torch.empty(self.storage_offset + self.extent(), dtype=self.dtype, device=device)
        return base.as_strided(self.size, self.stride, self.storage_offset)

    def key(self) -> tuple:
        return ("tensor", str(self.dtype), self.size, self.stride, self.storage_offset)


@dataclass(frozen=True)
class Scalar:
    """A Python number the queued op received; its value is compiled into the kernel."""
    value: bool | int | float | complex

    def __post_init__(self) -> None:
        if not isinstance(self.value, (bool, int, float, complex)):
            raise TypeError(f"Scalar holds a Python number, not {type(self.value).__name__}")

    def key(self) -> tuple:
        return ("scalar", _constant_key(self.value))


@dataclass(frozen=True)
class RuntimeScalar:
    """A Python float the kernel reads at each call, as a 0-d float64 tensor: its value is not
    part of the signature, so one kernel serves every value (fused_eager/runtime_scalars.py). The
    value here is the one the chain was described with; a call passes its own in `inputs`."""
    value: float

    def __post_init__(self) -> None:
        if not isinstance(self.value, float):
            raise TypeError(f"RuntimeScalar holds a Python float, not {type(self.value).__name__}")

    def key(self) -> tuple:
        return ("runtime_float",)

    def empty(self, device: str = "cpu") -> torch.Tensor:
        """A tensor of the layout the kernel reads the value from (a fake one under a
        FakeTensorMode)."""
        return torch.empty((), dtype=torch.float64, device=device)


Input = Union[TensorSpec, Scalar, RuntimeScalar]


@dataclass(frozen=True)
class InputRef:
    """Argument: the chain's external input `index`."""
    index: int


@dataclass(frozen=True)
class StepRef:
    """Argument: the result of the chain's step `index` (an earlier step)."""
    index: int


@dataclass(frozen=True)
class Step:
    op: Any  # an OpOverload such as torch.ops.aten.mul.Tensor
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()  # (name, value) pairs, so the step is hashable

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        kwargs = self.kwargs.items() if isinstance(self.kwargs, dict) else self.kwargs
        object.__setattr__(self, "kwargs", tuple(sorted(kwargs)))


@dataclass(frozen=True)
class Output:
    """Step `step`'s result is written out: into a new buffer (the queue allocated it at the
    call), or into external input `into_input` (an in-place op queued as its functional op)."""
    step: int
    into_input: int | None = None


class _HashedKey(tuple):
    """A nested key tuple that hashes once: a chain kept by the queue is looked up at every
    hand-over, and rehashing its steps cost more than the rest of the lookup."""

    def __new__(cls, items: tuple) -> _HashedKey:
        key = super().__new__(cls, items)
        key._hash = tuple.__hash__(key)
        return key

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        return (_HashedKey, (tuple(self),))


@functools.cache
def _op_name(op: Any) -> str:
    return str(op)  # "aten.mul.Tensor": the same in every process


def _constant_key(value: Any) -> tuple:
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_constant_key(v) for v in value))
    if not isinstance(value, _CONSTANT_TYPES):
        raise TypeError(f"a chain constant is a number, bool, str, dtype, None or a sequence of "
                        f"them, not {type(value).__name__} ({value!r})")
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")  # repr(nan) is stable, but all NaNs compare equal here
    return (type(value).__name__, repr(value))


@dataclass(frozen=True)
class Chain:
    inputs: tuple[Input, ...]
    steps: tuple[Step, ...]
    outputs: tuple[Output, ...]
    _static_key: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("inputs", "steps", "outputs"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        self._validate()
        object.__setattr__(self, "_static_key", self._make_static_key())

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        for i, spec in enumerate(self.inputs):
            if not isinstance(spec, (TensorSpec, Scalar, RuntimeScalar)):
                raise TypeError(f"chain input {i} is a {type(spec).__name__}; expected a "
                                f"TensorSpec, a Scalar or a RuntimeScalar")
        if not self.steps:
            raise ValueError("a chain has at least one step")
        for position, step in enumerate(self.steps):
            check_fusible(step.op, position)
            if is_reduction(step.op) and position != len(self.steps) - 1:
                raise UnfusibleOpError(f"step {position}: the reduction {step.op} may only end "
                                       f"a chain ({len(self.steps) - position - 1} steps follow)")
            for value in (*step.args, *(v for _, v in step.kwargs)):
                self._check_argument(value, position)
        if not self.outputs:
            raise ValueError("a chain writes at least one output")
        targets = [o.into_input for o in self.outputs if o.into_input is not None]
        if len(targets) != len(set(targets)):
            raise ValueError(f"two outputs are written into the same input: {targets}")
        for output in self.outputs:
            if not 0 <= output.step < len(self.steps):
                raise ValueError(f"output names step {output.step}; the chain has "
                                 f"{len(self.steps)} steps")
            if output.into_input is not None and not (
                    0 <= output.into_input < len(self.inputs)
                    and isinstance(self.inputs[output.into_input], TensorSpec)):
                raise ValueError(f"output of step {output.step} goes into input "
                                 f"{output.into_input}, which is not a tensor input")

    def _check_argument(self, value: Any, position: int) -> None:
        if isinstance(value, InputRef):
            if not 0 <= value.index < len(self.inputs):
                raise ValueError(f"step {position} refers to input {value.index}; the chain has "
                                 f"{len(self.inputs)} inputs")
        elif isinstance(value, StepRef):
            if not 0 <= value.index < position:
                raise ValueError(f"step {position} refers to step {value.index}, which is not "
                                 f"an earlier step")
        elif isinstance(value, (list, tuple)):
            for v in value:
                self._check_argument(v, position)
        else:
            _constant_key(value)  # raises for what is not a constant

    # ------------------------------------------------------------------ signature
    def _argument_key(self, value: Any) -> tuple:
        if isinstance(value, InputRef):
            return ("input", value.index)
        if isinstance(value, StepRef):
            return ("step", value.index)
        if isinstance(value, (list, tuple)):
            return ("seq", tuple(self._argument_key(v) for v in value))
        return _constant_key(value)

    def _make_static_key(self) -> tuple:
        steps = tuple((_op_name(s.op), tuple(self._argument_key(a) for a in s.args),
                       tuple((k, self._argument_key(v)) for k, v in s.kwargs))
                      for s in self.steps)
        outputs = tuple((o.step, o.into_input) for o in self.outputs)
        return _HashedKey((SIGNATURE_VERSION, tuple(i.key() for i in self.inputs), steps,
                           outputs))

    def signature(self, threads: int | None = None) -> tuple:
        """The compile-cache key; `threads` defaults to the caller's torch.get_num_threads()."""
        return (self._static_key, torch.get_num_threads() if threads is None else threads)

    def digest(self, threads: int | None = None) -> str:
        """The signature as a short hex string (the same in every process)."""
        return hashlib.sha256(repr(self.signature(threads)).encode()).hexdigest()[:24]

    # ------------------------------------------------------------------ metadata and eager runs
    def resolve(self, value: Any, inputs: Sequence[Any], results: Sequence[Any]) -> Any:
        """An argument with its references replaced by `inputs[i]` / `results[j]`."""
        if isinstance(value, InputRef):
            spec = self.inputs[value.index]
            return spec.value if isinstance(spec, Scalar) else inputs[value.index]
        if isinstance(value, StepRef):
            return results[value.index]
        if isinstance(value, (list, tuple)):
            return type(value)(self.resolve(v, inputs, results) for v in value)
        return value

    def run_eager(self, inputs: Sequence[Any]) -> list[torch.Tensor]:
        """Runs the steps op by op on real tensors (what the unfused path computes): writes the
        outputs that go into inputs and returns the others' results, in order."""
        results: list[Any] = []
        for step in self.steps:
            args = [self.resolve(a, inputs, results) for a in step.args]
            kwargs = {k: self.resolve(v, inputs, results) for k, v in step.kwargs}
            results.append(step.op(*args, **kwargs))
        new = []
        for output in self.outputs:
            if output.into_input is None:
                new.append(results[output.step])
            else:
                inputs[output.into_input].copy_(results[output.step])
        return new

    @functools.cached_property
    def step_specs(self) -> tuple[TensorSpec, ...]:
        """Each step's result metadata, from PyTorch's meta functions (as the queue computes it
        at the call)."""
        with FakeTensorMode():
            fakes = [spec.empty() if isinstance(spec, TensorSpec) else
                     spec.value if isinstance(spec, RuntimeScalar) else None
                     for spec in self.inputs]
            results: list[torch.Tensor] = []
            for step in self.steps:
                args = [self.resolve(a, fakes, results) for a in step.args]
                kwargs = {k: self.resolve(v, fakes, results) for k, v in step.kwargs}
                results.append(step.op(*args, **kwargs))
            return tuple(TensorSpec.of(r) for r in results)

    def output_specs(self) -> tuple[TensorSpec, ...]:
        """Layouts of the new buffers the outputs without `into_input` are written to."""
        return tuple(self.step_specs[o.step] for o in self.outputs if o.into_input is None)

    def kernel_input_specs(self) -> list[TensorSpec | RuntimeScalar]:
        """The inputs the kernel reads from memory, in order: tensors and runtime scalars."""
        return [spec for spec in self.inputs if isinstance(spec, (TensorSpec, RuntimeScalar))]

    def tensor_inputs(self, inputs: Sequence[Any], device: str = "cpu") -> list[torch.Tensor]:
        """The kernel's tensor arguments for `inputs`: the tensors, and each runtime scalar's
        value (the one given in `inputs`) as a 0-d float64 tensor on `device`."""
        return [x if isinstance(spec, TensorSpec) else
                torch.tensor(float(x), dtype=torch.float64, device=device)
                for x, spec in zip(inputs, self.inputs)
                if isinstance(spec, (TensorSpec, RuntimeScalar))]
