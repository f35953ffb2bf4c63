"""Inductor code generation for neuron: the CPU C++ kernel generator, pointed at neuron memory.

The software NeuronCore runs kernels as CPU code on device memory, which lives in host RAM, so
the kernels Inductor generates for the CPU are the neuron device's kernels: they receive the raw
pointers of neuron tensors. What differs from the CPU is the host-side wrapper: it allocates its
buffers with `empty_strided_neuron` (torchneuron._C.compile's counterpart of Inductor's
`empty_strided_cpu`) and calls the C++ kernels for a device Inductor does not know. Four
registrations make Inductor target neuron (see `register`)."""

from __future__ import annotations

import functools
import glob
import os

import torch

# internal: see runtime/torch_internals.py "register_backend_for_device"
# internal: see runtime/torch_internals.py "register_device_op_overrides"
# internal: see runtime/torch_internals.py "register_interface_for_device"
from torch._dynamo.device_interface import register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, \
    register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphModulePass, get_hash_for_files
from torch._inductor.utils import parallel_num_threads
from torch._inductor.virtualized import V

from ..runtime import extension
from . import inductor_cpu_paths, onednn_gemm
from .device_interface import NeuronInterface

DEVICE = "neuron"
# The names the generated wrapper gives the compile layer's bindings (torchneuron._C.compile).
ALLOCATOR = "empty_strided_neuron"  # its empty_strided, each buffer of the wrapper
LAUNCH = "launch_neuron"  # its launch_kernel, each C++ kernel call
ONE_ITEM = "as_one_item"  # its as_one_item, around the graph's call
CPP_WRAPPER_UNSUPPORTED = (
    "torch.compile on neuron does not support cpp_wrapper=True (AOTInductor's C++ wrapper has a "
    "runtime header only for built-in devices); compile without it: the generated Python "
    "wrapper calls the same fused C++ kernels. For a program exported on neuron, "
    "torch._inductor.aoti_compile_and_package works (docs/compile.md)")


# internal: see runtime/torch_internals.py "wrapper.PythonWrapperCodegen"
# internal: see runtime/torch_internals.py "SubgraphPythonWrapperCodegen"
# internal: see runtime/torch_internals.py "track_memory_lifecycle"
class _NeuronKernelCalls:
    """Emits neuron kernel launches as `launch_neuron(kernel, *args)`: the compiled C++ kernel
    runs at once when execution is synchronous, else it is queued on its buffers' stream (after
    the work queued there, as the graph's extern ops are), and buffer allocations as calls of
    `empty_strided_neuron` (0.3 us, where the generic `empty_strided(..., device='neuron')`
    costs 1.1 us in Python's argument parsing)."""

    def make_allocation(self, name, device, dtype, shape, stride, allocation_shape=None,
                        is_pinned=False):
        if device.type != DEVICE or config.test_configs.track_memory_lifecycle:
            return super().make_allocation(name, device, dtype, shape, stride, allocation_shape,
                                           is_pinned)
        # Inductor's line for the CPU's and CUDA's fast allocators, for neuron's.
        shape_tuple = self.codegen_python_shape_tuple(shape)
        allocation_tuple = self.codegen_python_shape_tuple(
            shape if allocation_shape is None else allocation_shape)
        stride_tuple = self.codegen_python_shape_tuple(stride)
        line = f"{name} = {ALLOCATOR}({allocation_tuple}, {stride_tuple}, {dtype})"
        if allocation_tuple != shape_tuple:
            line += f".as_strided({shape_tuple}, {stride_tuple})"
        return line

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True,
                                     **kwargs):
        # internal: see runtime/torch_internals.py "V.graph.get_current_device_or_throw"
        device = device or V.graph.get_current_device_or_throw()
        if device.type == DEVICE and not triton:
            self.writeline(self.wrap_kernel_call(LAUNCH, [kernel_name, *call_args]))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device,
                                             triton=triton, **kwargs)


class NeuronSubgraphWrapperCodegen(_NeuronKernelCalls, SubgraphPythonWrapperCodegen):
    """Wrapper of a subgraph (the body of cond/while_loop/invoke_subgraph)."""


class NeuronWrapperCodegen(_NeuronKernelCalls, PythonWrapperCodegen):
    """The Python wrapper: allocates buffers on neuron and calls the fused C++ kernels."""

    def write_header(self) -> None:
        super().write_header()
        # Each bound to a name of the wrapper's own: a call is then one global lookup.
        self.imports.writeline("from torchneuron._C import compile as neuron_compile_c")
        self.imports.writeline(f"{ALLOCATOR} = neuron_compile_c.empty_strided")
        # Under NEURON_MEMORY_PROTECT=1 each kernel runs inside a host access window.
        self.imports.writeline("from torchneuron.runtime.host_access import kernel_launcher")
        self.imports.writeline(f"{LAUNCH} = kernel_launcher(neuron_compile_c.launch_kernel)")
        self.imports.writeline(f"{ONE_ITEM} = neuron_compile_c.as_one_item")

    # internal: see runtime/torch_internals.py "wrapper.PythonWrapperCodegen"
    def generate_after_suffix(self, result) -> None:
        super().generate_after_suffix(result)
        # The graph's work (its kernels and the extern ops it dispatches) reaches the stream as
        # one queued item when execution is asynchronous (csrc/compile/KernelLaunch.h).
        result.writeline(f"{self.launcher_fn_name} = {ONE_ITEM}({self.launcher_fn_name})")

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        # CPU kernels on neuron buffers need memory the CPU can address in place: asked of the
        # runtime seam in its one place (csrc/aten/HostAccess.h), before any code is generated.
        from .._C import aten as _aten_c

        _aten_c.require_host_access("Inductor's CPU code generation for neuron buffers")
        if is_subgraph:
            return NeuronSubgraphWrapperCodegen(subgraph_name, parent_wrapper,
                                                partition_signatures)
        return NeuronWrapperCodegen()


# internal: see runtime/torch_internals.py "CppWrapperCpu"
class NeuronCppWrapperCodegen(CppWrapperCpu):
    """`cpp_wrapper=True` would write the wrapper itself in C++ against a per-device header of
    AOTInductor's (torch/csrc/inductor/cpp_wrapper/<device>.h) that exists only for built-in
    devices, so neuron refuses it by name; backend="neuron" drops the option with a warning."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        raise NotImplementedError(CPP_WRAPPER_UNSUPPORTED)


# internal: see runtime/torch_internals.py "CpuDeviceOpOverrides"
class NeuronDeviceOpOverrides(CpuDeviceOpOverrides):
    """What the wrapper writes for device housekeeping. Kernels are synchronous (no streams to
    fetch or sync), but the current device is real and switches with the tensors' index."""

    def set_device(self, device_idx: int) -> str:
        return f"torch.neuron.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.neuron.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.neuron.device({device_idx})"


# internal: see runtime/torch_internals.py "CustomGraphModulePass"
# internal: see runtime/torch_internals.py "parallel_num_threads"
class CodegenFingerprint(CustomGraphModulePass):
    """Changes nothing in the graph; its uuid puts into Inductor's cache key (computed anew for
    every graph) what neuron's generated code depends on beyond the graph:

    - the source of neuron's code generation (this package) and of its kernels (the file of
      torchneuron._C: the convolution's layout rule depends on it), so a graph cached by another
      torchneuron is not reused;
    - the matmul kernel setting (NEURON_COMPILE_GEMM);
    - the intra-op thread count the C++ kernels are generated for. Inductor keys it only for
      graphs with CPU tensors (FxGraphHashDetails.cpp_runtime_thread_count), so a neuron graph
      compiled under one thread was reused under two with its loops left serial (the 2-thread
      CNN of benchmarks/compile.py: 0.9 ms instead of 0.6, depending on which run filled the
      cache first)."""

    def __call__(self, gm) -> None:
        pass

    @staticmethod
    def sources() -> tuple[str, ...]:
        here = os.path.dirname(os.path.abspath(__file__))
        core = str(extension.find(torch.__version__))  # the torchneuron._C this process loaded
        return tuple(sorted(glob.glob(os.path.join(here, "*.py")))) + (core,)

    def uuid(self) -> bytes:
        return (self.source_hash() + b"gemm=" + onednn_gemm.setting().encode() +
                b"threads=" + str(self.kernel_thread_count()).encode())

    @staticmethod
    def kernel_thread_count() -> int | str:
        """What the C++ kernels specialize on: Inductor's own rule for CPU graphs."""
        if config.cpp.dynamic_threads:
            return "dynamic"
        return parallel_num_threads()

    @functools.cache
    def source_hash(self) -> bytes:
        return get_hash_for_files(self.sources())


@functools.cache
def register() -> None:
    """Teach Inductor and Dynamo the neuron device (idempotent)."""
    # 1. Kernels: Inductor's C++ (OpenMP + ATen vectorized) scheduling, for neuron tensors.
    # internal: see runtime/torch_internals.py "CppScheduling"
    # internal: see runtime/torch_internals.py "WrapperFxCodegen"
    register_backend_for_device(DEVICE, CppScheduling, NeuronWrapperCodegen,
                                NeuronCppWrapperCodegen, WrapperFxCodegen,
                                device_custom_pass=CodegenFingerprint())
    # 2. Runtime queries the compiler makes (device count, streams, properties).
    register_interface_for_device(DEVICE, NeuronInterface)
    # 3. Device housekeeping lines in the generated wrapper.
    register_device_op_overrides(DEVICE, NeuronDeviceOpOverrides())
    # 4. The wrapper codegen that calls CPU kernels for neuron is NeuronWrapperCodegen above.
    # Where Inductor tests for "cpu" to pick the C++ backend's code paths, neuron goes along.
    inductor_cpu_paths.install(DEVICE)
    # Matmuls of compiled graphs on oneDNN where it beats ATen's BLAS call (onednn_gemm.py).
    onednn_gemm.install(DEVICE)
