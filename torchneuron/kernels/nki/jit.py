"""@nki.jit: a kernel called with tensors runs on the software NeuronCore.

The call wraps each tensor argument as an HBM tensor, runs the kernel function once per SPMD
program (`kernel[grid](...)`, or once), checks every instruction against the selected
NeuronCore's rules before it runs, and returns the kernel's HBM results as tensors of the
caller's kind: neuron tensors for neuron inputs, CPU tensors for CPU inputs, numpy arrays for
numpy inputs. Writes to arguments are committed only when the kernel returns, so a kernel that
fails leaves them untouched. Called with the fake tensors of torch.compile's tracing, the kernel
runs its rules and shapes only, and returns fake results.

`compile_config=` (NKI 0.8's nki.compiler.CompileConfig) is checked and recorded on the kernel;
results here do not depend on it (see compile_config.py). `Kernel.run(..., seat=)` runs the kernel
as one rank of nki.multi_rank_simulate's world (see ranks.py).
"""

from __future__ import annotations

import functools
import itertools

import torch

from .arguments import CallFrame
from .compile_config import as_compile_config
from .context import KernelRun, running
from .cores import Cores
from .host_threads import single_threaded
from .rules import resolve_target


class Kernel:
    def __init__(self, fn, platform_target=None, grid=(), compile_config=None, **options):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.platform_target = platform_target
        self.grid = tuple(grid)
        self.compile_config = as_compile_config(compile_config)
        self.options = options  # accepted for source compatibility (mode=, debug flags)
        self.last_instructions = 0  # nki.isa instructions the last call ran

    def __repr__(self) -> str:
        return f"<NKI kernel {self.fn.__qualname__}>"

    def __getitem__(self, grid) -> "Kernel":
        """kernel[2](...) or kernel[gx, gy](...): the SPMD launch grid."""
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
        if not grid or any(g <= 0 for g in grid):
            raise ValueError(f"{self!r}: launch grid {grid} must have positive sizes")
        return Kernel(self.fn, self.platform_target, grid, self.compile_config, **self.options)

    @torch.compiler.disable
    def __call__(self, *args, **kwargs):
        return self.run(args, kwargs)

    def run(self, args, kwargs, seat=None):
        """Runs the kernel once (one program per core of the grid); `seat` is the rank of a
        multi-rank world the kernel runs as (None: rank 0 of a world of one)."""
        name = self.fn.__qualname__
        limits = resolve_target(self.platform_target)
        frame = CallFrame(name, args, kwargs)
        device = frame.device if frame.device.type != "meta" else None
        run = KernelRun(limits, device, computes=not frame.tracing, grid=self.grid)
        run.rank_seat = seat  # nki.collectives reads it (collectives.py)
        wrapped_args = [frame.wrap(a, self._arg_name(i)) for i, a in enumerate(args)]
        wrapped_kwargs = {k: frame.wrap(v, k) for k, v in kwargs.items()}
        programs = list(itertools.product(*(range(g) for g in self.grid))) if self.grid else []
        results = {}

        def program(core_run, ids):
            def body():
                core_run.program_ids = ids
                with running(core_run), single_threaded():  # tiles: no thread teams
                    results[ids] = self.fn(*wrapped_args, **wrapped_kwargs)
            return body

        try:
            if programs:  # one core per program, sharing HBM (see cores.py)
                cores = Cores(len(programs))
                runs = [run] + [KernelRun(limits, device, computes=not frame.tracing,
                                          grid=self.grid, shared=run) for _ in programs[1:]]
                for core_run in runs:
                    core_run.cores = cores
                    core_run.rank_seat = seat
                cores.run([program(r, ids) for r, ids in zip(runs, programs)])
                result = results[programs[-1]]
            else:
                program(run, ())()
                result = results[()]
            with running(run):
                outputs = frame.unwrap(result, run)
        except BaseException as error:
            for storage in run.staged:  # the arguments keep their contents
                storage.data, storage.original = storage.original, None
            if hasattr(error, "add_note"):
                error.add_note(f"in NKI kernel {name} on the software NeuronCore "
                               f"({limits.profile}, {limits.nc_version})")
            raise
        for storage in run.staged:
            storage.commit()
        self.last_instructions = run.instructions[0]
        return outputs

    def _arg_name(self, index: int) -> str:
        code = self.fn.__code__
        names = code.co_varnames[:code.co_argcount]
        return names[index] if index < len(names) else f"args[{index}]"


def jit(fn=None, mode="auto", platform_target=None, compile_config=None, **options):
    """Decorates an NKI kernel: `@nki.jit`, `@nki.jit()`, `@nki.jit(platform_target="trn3")` or
    `@nki.jit(compile_config=CompileConfig(...))`."""
    config = as_compile_config(compile_config)  # refused at decoration, as a bad option is
    if fn is None:
        return lambda f: Kernel(f, platform_target, compile_config=config, mode=mode, **options)
    return Kernel(fn, platform_target, compile_config=config, mode=mode, **options)


def simulate(kernel):
    """nki.simulate(kernel)(*args): runs the kernel on the software NeuronCore (which is what
    calling it does here); accepts @nki.jit kernels and plain functions."""
    return kernel if isinstance(kernel, Kernel) else Kernel(kernel)
