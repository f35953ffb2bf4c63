"""AOTInductor packages of programs exported on neuron (`torch._inductor.aoti_compile_and_package`
and `aoti_load_package`).

AOTInductor's C++ runtime knows CUDA, XPU and the CPU only (aoti_runtime/device_utils.h); a
runner for another device must be registered in C++ (RegisterAOTIModelRunner). The software
NeuronCore needs neither: its kernels are CPU code on host-addressable device memory, as
`torch.compile` on neuron already uses (inductor.py). So:

- Compiling: a program exported on neuron is moved to the CPU (`move_to_device_pass`) and
  compiled by AOTInductor's CPU C++ wrapper; the package's metadata records that it belongs to
  neuron and how to size its outputs from its inputs (`package_metadata`).
- Loading: an `AOTICompiledModel` whose package says neuron gets a loader (`NeuronLoader`) that
  checks every input is a neuron tensor on one device, allocates the outputs on that device at
  the call, and runs the package's CPU runner on CPU aliases of those neuron buffers as one
  item on the current neuron stream (`launch_neuron`): after the work queued there in async and
  fused modes, at once in sync mode.

The package's weights are constants of its shared library, in the runner's host memory (on the
software NeuronCore, the same RAM as neuron memory)."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

import sympy
import torch

from .._C import aten as _aten_c
from .._C import compile as _compile_c
from ..runtime import activity

DEVICE_KEY = "torchneuron.device"  # "neuron": the package runs on neuron tensors
OUTPUTS_KEY = "torchneuron.outputs"  # per output: dtype, sizes and strides (ints or expressions)
SYMBOLS_KEY = "torchneuron.symbols"  # a size symbol -> [tensor input, dimension] it is read from


def _tensors_in(value) -> list[torch.Tensor]:
    """The tensors in (nested) tuples, lists and dicts: an exported program's example inputs."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v)]
    return []


def program_device(program) -> torch.device | None:
    """The neuron device `program`'s weights and example inputs live on, or None when none is
    on neuron (a CPU program compiles as PyTorch compiles it)."""
    tensors = _tensors_in([program.state_dict, program.constants, program.example_inputs])
    devices = {t.device for t in tensors}
    if not any(d.type == "neuron" for d in devices):
        return None
    if len(devices) > 1:
        raise ValueError("aoti_compile_and_package: the exported program mixes devices "
                         f"({', '.join(sorted(str(d) for d in devices))}); export it with its "
                         "weights and example inputs on one neuron device")
    return devices.pop()


def _size_text(size, bound: dict[str, list[int]], what: str) -> int | str:
    if isinstance(size, int):
        return size
    expr = size.node.expr
    unbound = sorted(str(s) for s in expr.free_symbols if str(s) not in bound)
    if unbound:
        raise NotImplementedError(
            f"aoti_compile_and_package on neuron: {what} has size {expr}, which depends on "
            f"{', '.join(unbound)}, not on the inputs' sizes (a data-dependent output size); "
            "neuron allocates a package's outputs when it is called, before it runs")
    return str(expr)


def package_metadata(program) -> dict[str, str]:
    """What a neuron package's loader needs beyond the CPU package: its device, and each
    output's dtype, sizes and strides as ints or expressions over the inputs' sizes."""
    from torch.export.graph_signature import InputKind, OutputKind

    placeholders = program.graph.find_nodes(op="placeholder")
    bound: dict[str, list[int]] = {}
    tensor_inputs = [node.meta.get("val") for node, spec in
                     zip(placeholders, program.graph_signature.input_specs)
                     if spec.kind == InputKind.USER_INPUT]
    tensor_inputs = [v for v in tensor_inputs if isinstance(v, torch.Tensor)]
    for index, value in enumerate(tensor_inputs):
        for dim, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                bound.setdefault(str(size.node.expr), [index, dim])
    outputs = []
    returned = program.graph.output_node().args[0]
    for number, (node, spec) in enumerate(zip(returned, program.graph_signature.output_specs)):
        if spec.kind != OutputKind.USER_OUTPUT:
            continue
        value = node.meta.get("val") if isinstance(node, torch.fx.Node) else node
        what = f"output {number}"
        if not isinstance(value, torch.Tensor):
            raise NotImplementedError(
                f"aoti_compile_and_package on neuron: {what} is {type(value).__name__}, not a "
                "tensor; a neuron package returns tensors only")
        outputs.append({"dtype": str(value.dtype).removeprefix("torch."),
                        "sizes": [_size_text(s, bound, what) for s in value.shape],
                        "strides": [_size_text(s, bound, what) for s in value.stride()]})
    return {DEVICE_KEY: "neuron", OUTPUTS_KEY: json.dumps(outputs),
            SYMBOLS_KEY: json.dumps(bound)}


def compile_and_package(original: Callable) -> Callable:
    """`torch._inductor.aoti_compile_and_package`, compiling a program exported on neuron with
    AOTInductor's CPU C++ wrapper and marking its package as neuron's."""

    @functools.wraps(original)
    def aoti_compile_and_package(exported_program, *args, inductor_configs=None, **kwargs):
        from torch.export import ExportedProgram
        from torch.export.passes import move_to_device_pass

        if not isinstance(exported_program, ExportedProgram) or \
                program_device(exported_program) is None:
            return original(exported_program, *args, inductor_configs=inductor_configs,
                            **kwargs)
        _aten_c.require_host_access("an AOTInductor package of a neuron program (CPU code on "
                                "neuron memory)")
        configs = dict(inductor_configs or {})
        metadata = dict(configs.get("aot_inductor.metadata") or {})
        metadata.update(package_metadata(exported_program))
        configs["aot_inductor.metadata"] = metadata
        return original(move_to_device_pass(exported_program, "cpu"), *args,
                        inductor_configs=configs, **kwargs)

    return aoti_compile_and_package


def _size_function(text: int | str, symbols: list[str]) -> Callable[..., int]:
    if isinstance(text, int):
        return lambda *sizes: text
    return sympy.lambdify([sympy.Symbol(s) for s in symbols], sympy.sympify(text))


class NeuronLoader:
    """An `AOTIModelPackageLoader` of a neuron package: `boxed_run` takes and returns neuron
    tensors; everything else is the CPU loader's."""

    def __init__(self, loader, metadata: dict[str, str]) -> None:
        # Refused at the load, not first on the stream's worker, where the error would wait for
        # the next synchronization.
        _aten_c.require_host_access("running an AOTInductor package on neuron (CPU code on neuron "
                                "memory)")
        self._loader = loader
        bound = json.loads(metadata[SYMBOLS_KEY])
        self._symbols = list(bound)
        self._reads = [tuple(bound[s]) for s in self._symbols]
        self._outputs = [
            (getattr(torch, o["dtype"]),
             [_size_function(s, self._symbols) for s in o["sizes"]],
             [_size_function(s, self._symbols) for s in o["strides"]])
            for o in json.loads(metadata[OUTPUTS_KEY])]
        self._launch = _compile_c.as_one_item(self._launch_run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def boxed_run(self, inputs: list) -> list[torch.Tensor]:
        inputs = list(inputs)
        device = self._device_of(inputs)
        sizes = [int(inputs[i].shape[d]) for i, d in self._reads]
        outputs = [torch.empty_strided([int(f(*sizes)) for f in size_fns],
                                       [int(f(*sizes)) for f in stride_fns],
                                       dtype=dtype, device=device)
                   for dtype, size_fns, stride_fns in self._outputs]
        tensors = (*inputs, *outputs)
        activity.run_recorded("aoti_package", lambda: self._launch(len(inputs), *tensors),
                              tensors)
        return outputs

    @staticmethod
    def _device_of(inputs: list) -> torch.device:
        devices = set()
        for number, value in enumerate(inputs):
            if value.device.type != "neuron":
                raise RuntimeError(
                    "this AOTInductor package was compiled for neuron, but input "
                    f"{number} is on {value.device}; move the inputs to neuron (a package "
                    "compiled for neuron does not run on cpu tensors)")
            devices.add(value.device)
        if len(devices) > 1:
            raise RuntimeError("this AOTInductor package was compiled for neuron, and its "
                               "inputs are on several neuron devices ("
                               f"{', '.join(sorted(str(d) for d in devices))}); put them on one")
        return devices.pop() if devices else torch.device("neuron", torch.neuron.current_device())

    def _launch_run(self, count: int, *tensors) -> None:
        # One launch: queued as one item on the tensors' current stream, or run now when sync.
        _compile_c.launch_kernel(self._run, count, *tensors)

    def _run(self, count: int, *tensors) -> None:
        # Where the item runs (the stream's worker, or this thread in sync mode): the CPU runner
        # on CPU aliases of the neuron buffers, its results written into the neuron outputs.
        aliases = [_aten_c.cpu_alias(t) for t in tensors]
        results = self._loader.boxed_run(aliases[:count])
        for output, result in zip(aliases[count:], results):
            output.copy_(result)


def on_load(original_init: Callable) -> Callable:
    """`AOTICompiledModel.__init__`, giving a model loaded from a neuron package a NeuronLoader
    (every way of loading one constructs an AOTICompiledModel: load_package, load_pt2)."""

    @functools.wraps(original_init)
    def __init__(self, loader) -> None:
        original_init(self, loader)
        if isinstance(loader, NeuronLoader):
            return
        metadata = loader.get_metadata()
        if metadata.get(DEVICE_KEY) == "neuron":
            self.loader = NeuronLoader(loader, metadata)

    return __init__


def install_compile(inductor_module) -> None:
    """On `torch._inductor`'s import: its aoti_compile_and_package compiles neuron programs."""
    # internal: see runtime/torch_internals.py "aoti_compile_and_package"
    inductor_module.aoti_compile_and_package = compile_and_package(
        inductor_module.aoti_compile_and_package)


def install_load(package_module) -> None:
    """On `torch.export.pt2_archive._package`'s import: loaded neuron packages run on neuron."""
    # internal: see runtime/torch_internals.py "AOTICompiledModel"
    model = package_module.AOTICompiledModel
    model.__init__ = on_load(model.__init__)
