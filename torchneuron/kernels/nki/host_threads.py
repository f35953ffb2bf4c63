"""The simulator computes on tiles (at most 128 partitions x a few thousand elements), which are
just above ATen's parallel grain size: every instruction would start an OpenMP team. On a busy
host a team waits for a core to come free, a scheduler time slice per instruction (measured:
a 64K-element copy 30 us on one thread, 10 ms on two threads with the cores busy; the tutorial
matmul 15 s against 0.6 s). So a kernel runs with a team of one on the thread that runs it.

This is OpenMP's per-thread setting (omp_set_num_threads sets the calling thread's ICV, and
MKL's mkl_set_num_threads_local the calling thread's), restored when the kernel returns: it never
touches PyTorch's process-wide thread count (torch.set_num_threads), which other threads read.
Where the symbols cannot be found (a build without OpenMP), kernels run as they are.
"""

from __future__ import annotations

import ctypes
import functools

import torch


@functools.lru_cache(maxsize=1)
def _runtime():
    """(omp_get_max_threads, omp_set_num_threads, mkl_set_num_threads_local or None), from the
    OpenMP and MKL runtimes torch loaded into the process; None without OpenMP."""
    process = ctypes.CDLL(None)
    try:
        get, set_ = process.omp_get_max_threads, process.omp_set_num_threads
    except AttributeError:
        return None
    get.restype, set_.restype = ctypes.c_int, None
    set_.argtypes = [ctypes.c_int]
    mkl = getattr(process, "mkl_set_num_threads_local", None)
    if mkl is not None:
        mkl.restype, mkl.argtypes = ctypes.c_int, [ctypes.c_int]
    return get, set_, mkl


class single_threaded:
    """`with single_threaded():` the calling thread's torch CPU ops run without a thread team."""

    def __enter__(self):
        runtime = _runtime()
        self.saved = None
        if runtime is None:
            return self
        get, set_, mkl = runtime
        # internal: see runtime/torch_internals.py "at::get_num_threads (per-thread OpenMP)"
        torch.get_num_threads()  # ATen's lazy per-thread setup first, so it cannot undo ours
        self.saved = (get(), mkl(1) if mkl is not None else None)
        set_(1)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            _, set_, mkl = _runtime()
            threads, mkl_local = self.saved
            set_(threads)
            if mkl is not None:
                mkl(mkl_local)
        return False
