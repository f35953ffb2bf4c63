"""What the op battery runs: which OpInfos (from which of PyTorch's databases), which dtypes,
how a CPU sample becomes a neuron sample, and which tolerances and comparisons an OpInfo asks for.
Everything here is read from PyTorch's own OpInfo metadata; nothing is tuned to make neuron pass."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import torch

# The dtypes the battery covers: those a Trainium model uses, plus float64, which the float64
# policy decides (its cases count as "skipped by policy" when the policy rejects them).
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool,
          torch.complex64, torch.float64)
DTYPE_NAMES = {str(d).removeprefix("torch."): d for d in DTYPES}

# The layouts a sample can come in: "strided" from the OpInfo's sample_inputs, the sparse ones from
# its sparse sample functions (sample_inputs_sparse(layout, ...), what PyTorch's test_sparse*.py
# run), for the OpInfos whose flag says they support that layout.
LAYOUTS = {"strided": None, "sparse_coo": "supports_sparse", "sparse_csr": "supports_sparse_csr",
           "sparse_csc": "supports_sparse_csc", "sparse_bsr": "supports_sparse_bsr",
           "sparse_bsc": "supports_sparse_bsc"}

# Variants of one sample, in the order a unit runs them (the order is part of a case's identity:
# a crashed worker resumes after the case that crashed).
VARIANTS = ("forward", "backward", "inplace", "out")

# The test whose OpInfo metadata (skips, tolerances) describes "device result vs CPU result".
_COMPARE_TEST = ("TestCommon", "test_compare_cpu")
_DEVICE_TYPE = "privateuse1"


def databases() -> dict[str, list]:
    """PyTorch's OpInfo databases present in this torch, by name (imported lazily: ~3 s)."""
    import torch.testing._internal.common_methods_invocations as cmi

    dbs = {"op_db": list(cmi.op_db), "python_ref_db": list(cmi.python_ref_db)}
    foreach = [op for name in ("foreach_unary_op_db", "foreach_binary_op_db",
                               "foreach_pointwise_op_db", "foreach_reduce_op_db",
                               "foreach_other_op_db")
               for op in getattr(cmi, name, ())]
    if foreach:
        dbs["foreach"] = foreach
    return dbs


def full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def category(db: str, op) -> str:
    """The report's grouping: by database for refs and foreach, else by the op's family."""
    from torch.testing._internal.opinfo.core import (BinaryUfuncInfo, ReductionOpInfo,
                                                     SpectralFuncInfo, UnaryUfuncInfo)

    if db != "op_db":
        return db
    for prefix, name in (("linalg.", "linalg"), ("fft.", "spectral"), ("special.", "special"),
                         ("nn.functional.", "nn.functional"), ("_refs.", "python_ref")):
        if op.name.startswith(prefix):
            return name
    for cls, name in ((SpectralFuncInfo, "spectral"), (UnaryUfuncInfo, "unary"),
                      (BinaryUfuncInfo, "binary"), (ReductionOpInfo, "reduction")):
        if isinstance(op, cls):
            return name
    return "other"


@dataclass(frozen=True)
class Unit:
    """One (OpInfo, dtype, layout of its samples): the battery's unit of work, run by one worker."""

    db: str
    index: int  # position in the database: how a worker finds the OpInfo again
    op: str
    dtype: str
    category: str
    layout: str = "strided"

    @property
    def label(self) -> str:
        """The OpInfo's name, with the layout of its samples where that is not strided."""
        return self.op if self.layout == "strided" else f"{self.op}@{self.layout}"

    @property
    def key(self) -> str:
        return f"{self.db}:{self.label}:{self.dtype}"


def layouts_of(op, wanted=LAYOUTS) -> list[str]:
    """The layouts among `wanted` the OpInfo samples: strided always, a sparse one where its flag
    (supports_sparse, supports_sparse_csr, ...) is set."""
    return [name for name in wanted
            if LAYOUTS[name] is None or getattr(op, LAYOUTS[name], False)]


def enumerate_units(dbs: dict[str, list], patterns: list[str] | None = None,
                    dtypes: list[str] | None = None,
                    layouts: list[str] | None = None) -> list[Unit]:
    """Every (OpInfo, dtype, layout) of the chosen databases whose dtype the OpInfo supports on
    CPU and whose layout it samples. `patterns` are shell globs on the op's full name (e.g.
    "linalg.*", "add"); units of a sparse layout are in the category "sparse"."""
    wanted = [DTYPE_NAMES[d] for d in dtypes] if dtypes else list(DTYPES)
    units = []
    for db, ops in dbs.items():
        for index, op in enumerate(ops):
            name = full_name(op)
            if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
                continue
            supported = op.supported_dtypes("cpu")
            for layout in layouts_of(op, layouts or LAYOUTS):
                group = category(db, op) if layout == "strided" else "sparse"
                for dtype in wanted:
                    if dtype in supported:
                        units.append(Unit(db, index, name, str(dtype).removeprefix("torch."),
                                          group, layout))
    return units


def _active_decorators(op, dtype):
    for info in op.decorators:
        if not hasattr(info, "is_active"):  # a bare decorator applies to every test
            yield info
        elif info.is_active(*_COMPARE_TEST, _DEVICE_TYPE, dtype, {}):
            yield from info.decorators


def tolerances(op, dtype) -> tuple[float | None, float | None]:
    """(atol, rtol) the OpInfo asks for in its device-vs-CPU test; None: assert_close's default
    for the dtype."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

    atol = rtol = None
    for dec in _active_decorators(op, dtype):
        if isinstance(dec, toleranceOverride) and dtype in dec.d:
            atol, rtol = dec.d[dtype].atol, dec.d[dtype].rtol
        elif isinstance(dec, precisionOverride) and dtype in dec.d and atol is None:
            atol, rtol = dec.d[dtype], 0.0
    if atol is not None:
        # Never stricter than assert_close's defaults for the dtype.
        default_rtol, default_atol = torch.testing._comparison.default_tolerances(
            torch.empty(0, dtype=dtype))
        atol, rtol = max(atol, default_atol), max(rtol, default_rtol)
    return atol, rtol


def values_comparable(op, dtype) -> bool:
    """False for ops whose values are random or undefined (uninitialized memory, random
    sampling): the OpInfo says so by skipping its own device-vs-CPU comparison for that reason.
    Their results are compared in structure, shape, dtype and device instead."""
    if getattr(op, "has_nondeterministic_output", False):
        return False
    if any("wrapper_set_seed" in getattr(getattr(info.op, "__code__", None), "co_names", ())
           for info in (op, getattr(op, "torch_opinfo", op))):
        # Random ops (OpInfo seeds them; a _refs entry through the op it mirrors): repeatable on
        # one device, but each device has its own random stream (neuron's is derived from Philox
        # (seed, offset), as CUDA's is Philox), so values are not the CPU's.
        return False
    for dec in _active_decorators(op, dtype):
        reason = _skip_reason(dec)
        if reason is not None and any(w in reason.lower() for w in (
                "non-deterministic", "nondeterministic", "undefined", "random", "empty")):
            return False
    return True


def _skip_reason(dec) -> str | None:
    """The reason text of a unittest.skip(...) decorator, else None."""
    if getattr(dec, "__qualname__", "").startswith("skip.") and dec.__closure__:
        for cell in dec.__closure__:
            if isinstance(cell.cell_contents, str):
                return cell.cell_contents
    return None


def to_device(obj, device: str, memo: dict | None = None):
    """A sample moved to `device`, as a sample built for the device would be: tensors copied
    (see _moved_tensor; two references to one tensor stay two references to one copy), and "cpu"
    device arguments (factory functions, Tensor.to) retargeted."""
    memo = {} if memo is None else memo
    if isinstance(obj, torch.Tensor):
        if id(obj) not in memo:
            memo[id(obj)] = _moved_tensor(obj, device)
        return memo[id(obj)]
    if isinstance(obj, torch.device):
        return torch.device(device) if obj.type == "cpu" else obj
    if isinstance(obj, str):
        return device if obj == "cpu" else obj
    if type(obj) in (list, tuple):
        return type(obj)(to_device(x, device, memo) for x in obj)
    if type(obj) is dict:
        return {k: to_device(v, device, memo) for k, v in obj.items()}
    return obj


def _moved_tensor(obj: torch.Tensor, device: str) -> torch.Tensor:
    """A copy of one sample tensor on `device` that autograd treats as it treats `obj`:
    - a view keeps its place in a copy of its whole base (as_strided samples read memory outside
      the view), where the base holds the view's dtype (a real view of a complex base, such as
      `window.real[:8]`, is copied on its own: its strides count elements of the other dtype);
    - a view made in no-grad mode (as every OpInfo sample is: the sample functions run under
      no_grad) of a base that requires grad reads requires_grad=True but gets no gradient of its
      own (None, as for an input the output does not use; istft's `window=window[:8]`), so its
      copy is such a view too, of a copy of the base that requires grad (a view given
      requires_grad_() itself, dot's `x.conj().requires_grad_()`, is a leaf and has one);
    - any other tensor keeps requires_grad as a fresh leaf."""
    base = obj._base
    # (conj/neg views keep their bits through a plain copy instead)
    in_base = (base is not None and obj.layout == torch.strided and obj.dtype == base.dtype
               and base.is_contiguous() and base.storage_offset() == 0 and not obj.is_conj()
               and not obj.is_neg())
    no_gradient = base is not None and obj.requires_grad and not _has_gradient_edge(obj)
    with torch.no_grad():
        moved = (base if in_base else obj).detach().to(device)
        if no_gradient:
            moved.requires_grad_()
        if in_base:
            moved = moved.as_strided(obj.size(), obj.stride(), obj.storage_offset())
        elif no_gradient:
            moved = moved.view_as(moved)
    return moved if no_gradient else moved.requires_grad_(obj.requires_grad)


def _has_gradient_edge(t: torch.Tensor) -> bool:
    """Whether autograd gives `t`, a view that requires grad, a gradient of its own: a grad_fn,
    or a leaf's accumulator, which an op on `t` points at (torch.autograd.graph.get_gradient_edge
    reads it so). A view made in no-grad mode of a base that requires grad has neither."""
    if t.grad_fn is not None:
        return True
    with torch.enable_grad():
        return t.view_as(t).grad_fn.next_functions[0][0] is not None
