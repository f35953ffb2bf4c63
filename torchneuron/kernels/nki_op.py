"""nki_op: a function that calls NKI kernels, registered as a PyTorch operator.

    @nki_op("mylib::add", mutates_args=())
    def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return add_kernel(a, b)

The result is a `torch.library` custom operator (schema from the type hints, `mutates_args` as
declared) whose fake implementation is the same function: its @nki.jit kernels, called with
torch.compile's fake tensors, check their rules and trace their output shapes without running,
so torch.compile and torch.export see one node and no graph break. `op.register_autograd(...)`
adds a backward (usually another nki_op). Under `torch.autocast("neuron")` floating inputs are
cast to `autocast_dtype` (float32 by default; None leaves them as they come).
"""

from __future__ import annotations

import functools

import torch


def _tensors(args, kwargs):
    for name, value in list(enumerate(args)) + list(kwargs.items()):
        if isinstance(value, torch.Tensor):
            yield name, value
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                if isinstance(v, torch.Tensor):
                    yield f"{name}[{i}]", v


def nki_op(name: str, fn=None, /, *, mutates_args=(), schema: str | None = None,
           autocast_dtype: torch.dtype | None = torch.float32, device_type: str = "neuron"):
    """Registers `fn` (which calls @nki.jit kernels) as the operator `name` ("namespace::op")."""
    if "::" not in name:
        raise ValueError(f"nki_op name {name!r} must look like 'namespace::op_name'")

    def register(fn):
        import inspect
        params = list(inspect.signature(fn).parameters)

        @functools.wraps(fn)
        def implementation(*args, **kwargs):
            for where, t in _tensors(args, kwargs):
                arg = params[where] if isinstance(where, int) and where < len(params) else where
                if t.device.type != device_type:
                    raise RuntimeError(f"nki_op {name}: argument {arg!r} is on {t.device}; NKI "
                                       f"kernels run on {device_type} tensors (move it with "
                                       f".to('{device_type}'))")
            try:
                return fn(*args, **kwargs)
            except Exception as error:
                if hasattr(error, "add_note"):
                    error.add_note(f"in nki_op {name}")
                raise

        try:
            op = torch.library.custom_op(name, implementation, mutates_args=mutates_args,
                                         schema=schema)
        except ValueError as error:
            raise ValueError(f"nki_op {name}: {error} (nki_op builds the operator's schema from "
                             "the function's type hints)") from None
        op.register_fake(implementation)
        if autocast_dtype is not None:
            torch.library.register_autocast(op, device_type, autocast_dtype)
        return op

    return register if fn is None else register(fn)
