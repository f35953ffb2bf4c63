"""When the runtime gets its configuration: at the first call into `torch.neuron` or the first
neuron tensor, never at `import torch` (docs/how-it-works.md#registration). The C++ core asks for
it itself when a device query finds the runtime unconfigured (a neuron tensor made before any
`torch.neuron` call), through the callback `install()` registers; `torch.neuron` calls
`configure()`. Configuring is not initializing: device state (memory, generators' use, streams)
is created later, at the first device use or `torch.neuron.init()`, as CUDA does."""

from __future__ import annotations

import threading
from typing import Callable

from .._C import runtime as _runtime_c
from . import config

_lock = threading.RLock()
_on_configure: list[Callable[[config.Config], None]] = []
_on_configured: list[Callable[[config.Config], None]] = []


def on_configure(fn: Callable[[config.Config], None]) -> None:
    """Runs `fn(config)` when the runtime is configured (a layer above applies its settings:
    the float64 policy, ...). Registered at import, before any device use."""
    _on_configure.append(fn)


def on_configured(fn: Callable[[config.Config], None]) -> None:
    """Runs `fn(config)` right after the runtime is configured, when device queries work (the
    starting device of a process a launcher started)."""
    _on_configured.append(fn)


def configure() -> config.Config:
    """Reads the configuration (once) and configures the runtime; raises ConfigError, naming the
    variable, when it is invalid, at this and every later call."""
    if _runtime_c.is_configured():
        return config.current()
    with _lock:
        cfg = config.current()
        if not _runtime_c.is_configured():
            # Which runtime first: the layers above ask its capabilities as they configure.
            _runtime_c.set_memory_protection(cfg.memory_protect)
            for fn in _on_configure:
                fn(cfg)
            _runtime_c.configure(cfg.device_count, cfg.hbm_bytes_per_device)
            for fn in _on_configured:
                fn(cfg)
        return cfg


def install() -> None:
    """Lets the C++ core configure the runtime lazily through `configure()`."""
    _runtime_c.set_lazy_configurator(configure)
