"""A model's own random numbers (stochastic depth, MoE router jitter, Gumbel noise, MAE's random
masking, vocoder noise) taken from the CPU run and given to the neuron run, so that both runs of
one model compute with the same draws and their results can be compared.

The neuron generator is Philox-shaped like CUDA's (16-byte (seed, offset) state), so for one seed
its stream differs from the CPU's mt19937 stream, as CUDA's does; comparing a model that draws in
forward would compare two different random samples. The generator itself is checked elsewhere
(tests/device/test_generator.py, the op battery's random ops in structure); here the draws are
inputs. Every ATen op tagged `nondeterministic_seeded` that draws from a default generator is
recorded on the CPU (op name and outputs); the neuron run must draw the same ops in the same
order with the same shapes, runs each op on neuron itself, and gets the CPU's values copied into
its outputs. Draws from an explicit generator (the battery's own input recipes) are left alone
on both sides."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .judge import Mismatch

_SEEDED = torch.Tag.nondeterministic_seeded


def _argument(func, args, kwargs, name: str):
    """The value of argument `name` of this call (its schema default where not passed)."""
    for i, arg in enumerate(func._schema.arguments):
        if arg.name == name:
            if name in kwargs:
                return kwargs[name]
            return args[i] if i < len(args) and not arg.kwarg_only else arg.default_value
    return None


def _is_draw(func, args, kwargs) -> bool:
    """A seeded op that draws from a default generator. Attention kernels are seeded for their
    dropout; at dropout_p == 0 they draw nothing (and which kernel runs differs by device)."""
    if _SEEDED not in func.tags:
        return False
    if _argument(func, args, kwargs, "dropout_p") == 0:
        return False
    explicit = kwargs.get("generator")
    return explicit is None and not any(isinstance(a, torch.Generator) for a in args)


def _tensor_outputs(out) -> list[torch.Tensor]:
    return [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]


# ATen's dropout takes the fused native_dropout on accelerators (PrivateUse1 included) and, on
# the CPU, multiplies by a noise tensor that bernoulli_(1 - p) filled: one draw each, of
# different ops. The CPU's noise gives the neuron run its mask.
_CPU_DROPOUT = str(torch.ops.aten.bernoulli_.float)


def _dropout_from_cpu_noise(args, out, noise: torch.Tensor):
    source, p = args[0], float(args[1])
    output, mask = out
    if tuple(noise.shape) != tuple(output.shape):
        raise Mismatch(f"random draws: neuron's dropout of {tuple(output.shape)} where the CPU "
                       f"drew noise of {tuple(noise.shape)}")
    with torch.no_grad():
        mask.copy_(noise != 0)
        output.copy_(source * mask * (1.0 / (1.0 - p)))
    return out


class _Recorder(TorchDispatchMode):
    def __init__(self, draws: list[tuple[str, list[torch.Tensor]]]):
        super().__init__()
        self.draws = draws

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _is_draw(func, args, kwargs):
            # In-place draws (uniform_, bernoulli_) return their input, which later ops change.
            self.draws.append((str(func), [t.detach().clone() for t in _tensor_outputs(out)]))
        return out


class _Replayer(TorchDispatchMode):
    def __init__(self, draws: list[tuple[str, list[torch.Tensor]]]):
        super().__init__()
        self.draws = draws
        self.position = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not _is_draw(func, args, kwargs):
            return out
        if self.position >= len(self.draws):
            raise Mismatch(f"random draws: neuron drew {func} after the CPU's "
                           f"{len(self.draws)} draws")
        name, recorded = self.draws[self.position]
        self.position += 1
        if func is torch.ops.aten.native_dropout.default and name == _CPU_DROPOUT:
            return _dropout_from_cpu_noise(args, out, recorded[0])
        got = _tensor_outputs(out)
        shapes = [tuple(t.shape) for t in got]
        if name != str(func) or shapes != [tuple(t.shape) for t in recorded]:
            raise Mismatch(f"random draws: neuron's draw {self.position} is {func} {shapes}, "
                           f"the CPU's {name} {[tuple(t.shape) for t in recorded]}")
        with torch.no_grad():
            for dst, src in zip(got, recorded):
                dst.copy_(src)
        return out


class RandomDraws:
    """The draws of one stage: `recording()` around the CPU run, then `replaying()` around each
    neuron attempt (each attempt starts from the first draw)."""

    def __init__(self):
        self.draws: list[tuple[str, list[torch.Tensor]]] = []

    def __len__(self) -> int:
        return len(self.draws)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        self.draws.clear()
        with _Recorder(self.draws):
            yield

    def discard(self) -> None:
        """Forgets the draws recorded so far, while recording goes on: a CPU attempt that failed
        and is retried another way must not leave its draws for neuron to replay."""
        self.draws.clear()

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """Nothing to do (and no dispatch mode) when the CPU run drew nothing; raises Mismatch
        when the neuron run drew fewer numbers than the CPU run."""
        if not self.draws:
            yield
            return
        replayer = _Replayer(self.draws)
        with replayer:
            yield
        if replayer.position != len(self.draws):
            name = self.draws[replayer.position][0]
            raise Mismatch(f"random draws: neuron drew {replayer.position} times, the CPU "
                           f"{len(self.draws)} (next: {name})")
