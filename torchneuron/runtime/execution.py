"""How eager ops execute on neuron: queued per stream and run by the runtime's stream workers
(NEURON_EAGER_MODE=async, the default; csrc/runtime/Execution.h), the same with hot chains of
pointwise ops fused into one kernel (fused; csrc/fused_eager/FusedEager.h), or synchronously (sync);
csrc/aten/Launch.h decides for each op. This module is the Python side: the mode a process runs
in, and the few places above the C++ core that must wait for queued work before they touch
device memory themselves."""

from __future__ import annotations

from .._C import aten as _aten_c
from .._C import launch as _launch_c
from .._C import runtime as _runtime_c
from . import device_state


def mode() -> str:
    """"sync", "async" or "fused": the configured mode of this process (NEURON_EAGER_MODE, read
    with the rest of the configuration)."""
    device_state.configure()
    return _launch_c.configured_eager_mode()


def eager_mode() -> str:
    """"sync", "async" or "fused": the mode ops run in now, the run-time settings applied to the
    configured one: "sync" under NEURON_LAUNCH_BLOCKING=1, "async" for fused mode while
    torch.use_deterministic_algorithms is on (fused chains are not held then)."""
    device_state.configure()
    return _launch_c.eager_mode()


def launch_blocking() -> bool:
    device_state.configure()
    return _launch_c.launch_blocking()


def settle() -> None:
    """Waits for all queued device work and raises its pending error: for code that reads or
    writes neuron memory itself (compiled graphs' C++ kernels). Free when nothing is queued."""
    _launch_c.settle()


def guard_host_kernels(namespace: str) -> tuple[str, ...]:
    """For a C++ extension whose kernels are catch-alls (registered with TORCH_LIBRARY's
    `m.def("op", &fn)`, no dispatch key): such a kernel runs directly on neuron tensors and reads
    their memory through data pointers, ahead of the dispatcher's neuron fallback and so without
    its wait for queued work. Call this once the extension is loaded: each of the namespace's
    catch-all-only ops then waits for queued work first (csrc/aten/HostKernels.h). Returns the
    ops guarded by this call."""
    return tuple(_aten_c.guard_host_kernels(namespace))


def drain_at_exit() -> None:
    """At interpreter exit: queued work finishes before the process tears down what it uses. An
    error it raised has no synchronization point left to surface at; it is printed."""
    if _runtime_c.is_configured() and not _launch_c.device_idle():
        try:
            _launch_c.settle()
        except Exception as e:  # noqa: BLE001 - the process is exiting; report, do not raise
            import sys

            print(f"neuron: queued work failed before exit: {e}", file=sys.stderr)
