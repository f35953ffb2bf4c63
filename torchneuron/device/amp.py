"""`torch.neuron.amp`: the deprecated device-specific spellings of `torch.amp`, as `torch.cuda.amp`
keeps them, so code written for CUDA's old names runs with one word changed. Each warns, as
CUDA's does, with the `torch.amp` call to use instead."""

from __future__ import annotations

import functools
import sys

import torch
from typing_extensions import deprecated

__all__ = ["GradScaler", "autocast", "custom_fwd", "custom_bwd"]


class GradScaler(torch.amp.GradScaler):
    """``torch.neuron.amp.GradScaler(args...)`` is deprecated. Please use
    ``torch.amp.GradScaler("neuron", args...)`` instead."""

    @deprecated(
        "`torch.neuron.amp.GradScaler(args...)` is deprecated. "
        "Please use `torch.amp.GradScaler('neuron', args...)` instead.",
        category=FutureWarning,
    )
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        super().__init__("neuron", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


@deprecated(
    "`torch.neuron.amp.autocast(args...)` is deprecated. "
    "Please use `torch.amp.autocast('neuron', args...)` instead.",
    category=FutureWarning,
)
class autocast(torch.amp.autocast_mode.autocast):
    """``torch.neuron.amp.autocast(args...)`` is deprecated. Please use
    ``torch.amp.autocast("neuron", args...)`` instead. The default dtype is neuron's autocast
    dtype (bfloat16 unless `torch.set_autocast_dtype` changed it), not CUDA's float16."""

    # Before Python 3.13, inspect.signature of a class decorated with @deprecated needs an
    # explicit __new__ (the same workaround as torch.cuda.amp.autocast).
    if sys.version_info < (3, 13):
        def __new__(cls, enabled: bool = True, dtype: torch.dtype | None = None,
                    cache_enabled: bool = True):
            return super().__new__(cls)

        def __init_subclass__(cls):
            pass

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None,
                 cache_enabled: bool = True):
        super().__init__("neuron", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


@deprecated(
    "`torch.neuron.amp.custom_fwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_fwd(args..., device_type='neuron')` instead.",
    category=FutureWarning,
)
def custom_fwd(fwd=None, *, cast_inputs=None):
    """``torch.neuron.amp.custom_fwd(args...)`` is deprecated. Please use
    ``torch.amp.custom_fwd(args..., device_type='neuron')`` instead."""
    return functools.partial(torch.amp.custom_fwd, device_type="neuron")(
        fwd=fwd, cast_inputs=cast_inputs)


@deprecated(
    "`torch.neuron.amp.custom_bwd(args...)` is deprecated. "
    "Please use `torch.amp.custom_bwd(args..., device_type='neuron')` instead.",
    category=FutureWarning,
)
def custom_bwd(bwd):
    """``torch.neuron.amp.custom_bwd(args...)`` is deprecated. Please use
    ``torch.amp.custom_bwd(args..., device_type='neuron')`` instead."""
    return functools.partial(torch.amp.custom_bwd, device_type="neuron")(bwd)
