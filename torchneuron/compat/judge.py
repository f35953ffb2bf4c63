"""The one result judge of both batteries: a neuron result against the CPU result of the same
inputs, leaf by leaf (same structure, tensors on the expected device with the same shape, dtype
and layout, values within torch.testing.assert_close's tolerances), with the largest absolute
difference reported where one is defined."""

from __future__ import annotations

import math

import torch


class Mismatch(AssertionError):
    """A neuron result differs from the CPU's; `max_error` is the largest absolute difference
    where one is defined."""

    def __init__(self, message: str, max_error: float | None = None):
        super().__init__(message)
        self.max_error = max_error


def flatten(obj, path: str = "out") -> list[tuple[str, object]]:
    """(path, leaf) pairs of a nested result; return_types (structseqs) are tuples."""
    if isinstance(obj, (list, tuple)) and not isinstance(obj, torch.Size):
        return [leaf for i, x in enumerate(obj) for leaf in flatten(x, f"{path}[{i}]")]
    if isinstance(obj, dict):
        return [leaf for k in sorted(obj) for leaf in flatten(obj[k], f"{path}[{k!r}]")]
    return [(path, obj)]


def max_error(actual: torch.Tensor, expected: torch.Tensor) -> float | None:
    """The largest absolute difference, computed in double precision (NaN where both are NaN
    counts as equal, NaN on one side as infinitely far); None when shapes or dtypes differ."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype or actual.numel() == 0:
        return None
    a, e = actual.detach(), expected.detach()
    if a.layout != torch.strided or e.layout != torch.strided:
        # Sparse results are measured over their dense values (sparse CSR/BSR minus CSR/BSR is
        # not an op PyTorch has).
        a, e = a.to_dense(), e.to_dense()
    if a.dtype == torch.bool:
        a, e = a.int(), e.int()
    if not (a.is_floating_point() or a.is_complex()):
        a, e = a.long(), e.long()
    diff = (a.to(torch.complex128 if a.is_complex() else torch.float64)
            - e.to(torch.complex128 if e.is_complex() else torch.float64)).abs()
    both_nan = a.isnan() & e.isnan() if a.is_floating_point() or a.is_complex() else None
    if both_nan is not None:
        diff = diff.masked_fill(both_nan, 0)
    value = diff.max().item()
    return value if not math.isnan(value) else float("inf")


def compare(actual, expected, atol: float | None = None, rtol: float | None = None,
            values: bool = True, device: str = "neuron", measure: bool = False) -> float:
    """Raises Mismatch when `actual` (neuron) is not `expected` (CPU); see compare_leaves."""
    return compare_leaves(flatten(actual), flatten(expected), atol, rtol, values, device, measure)


def compare_leaves(actual: list[tuple[str, object]], expected: list[tuple[str, object]],
                   atol: float | None = None, rtol: float | None = None, values: bool = True,
                   device: str = "neuron", measure: bool = False) -> float:
    """Raises Mismatch when the (path, leaf) pairs of `actual` (neuron) are not those of
    `expected` (CPU). Result tensors must be on `device`: neuron, unless the inputs had no neuron
    tensor or device (`torch.arange(3)`). atol/rtol None: assert_close's defaults for the dtype.
    With values=False only structure, shapes, dtypes and devices are compared (random or
    undefined results). Returns the largest absolute difference over every tensor when `measure`
    (measuring costs a pass over each result, which the op battery's many cases do not pay),
    else 0.0."""
    if len(actual) != len(expected):
        raise Mismatch(f"neuron returned {len(actual)} values, CPU {len(expected)}")
    if [p for p, _ in actual] != [p for p, _ in expected]:
        raise Mismatch(f"neuron returned {[p for p, _ in actual]}, CPU {[p for p, _ in expected]}")
    worst = 0.0
    for (path, a), (_, e) in zip(actual, expected):
        if isinstance(e, torch.Tensor):
            error = _compare_tensor(path, a, e, atol, rtol, values, device, measure)
            worst = max(worst, error or 0.0)
        elif values or not isinstance(e, (int, float, complex)):
            if isinstance(a, torch.Tensor):
                raise Mismatch(f"{path}: neuron returned a tensor, CPU {type(e).__name__}")
            same = (a == e) or (isinstance(e, float) and math.isnan(e) and math.isnan(a))
            if not same:
                raise Mismatch(f"{path}: neuron returned {a!r}, CPU {e!r}")
    return worst


def _compare_tensor(path: str, a, e: torch.Tensor, atol, rtol, values: bool, device: str,
                    measure: bool) -> float | None:
    if not isinstance(a, torch.Tensor):
        raise Mismatch(f"{path}: neuron returned {type(a).__name__}, CPU a tensor")
    if e.device.type == "cpu" and a.device.type != device:
        raise Mismatch(f"{path}: the result is on {a.device}, not on {device}")
    if a.shape != e.shape or a.dtype != e.dtype or a.layout != e.layout:
        raise Mismatch(f"{path}: neuron gave {tuple(a.shape)} {a.dtype} {a.layout}, "
                       f"CPU {tuple(e.shape)} {e.dtype} {e.layout}")
    if not values:
        return None
    a_cpu = a.detach().to("cpu")
    try:
        torch.testing.assert_close(a_cpu, e.detach(), atol=atol, rtol=rtol, equal_nan=True,
                                   check_stride=False)
    except AssertionError as err:
        first = str(err).strip().splitlines()[0]
        raise Mismatch(f"{path}: {first}", max_error(a_cpu, e)) from None
    return max_error(a_cpu, e) if measure else None
