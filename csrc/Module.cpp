// torchneuron._C: the Python face of the core. Python configures the runtime once (profile +
// environment, see torchneuron/runtime/config.py) and reads the allocator's figures here.
#include "DtypePolicy.h"
#include "NeuronAllocator.h"
#include "NeuronGenerator.h"
#include "NeuronGuard.h"
#include "runtime/NeuronRuntime.h"

#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

namespace torchneuron {
void register_hooks();
std::map<std::string, std::vector<std::string>> autocast_op_lists();  // Autocast.cpp
std::vector<std::string> route_to_cpu_kernels();  // Fallback.cpp
PyObject* empty_strided_function();  // CompileAllocation.cpp
}

namespace {

namespace tn = torchneuron;

py::list memory_snapshot() {
  py::list out;
  for (const auto& s : tn::neuron_allocator().snapshot()) {
    py::dict d;
    d["device"] = s.device;
    d["address"] = s.address;
    d["size"] = s.size;
    d["requested_size"] = s.requested;
    d["allocated"] = s.allocated;
    out.append(d);
  }
  return out;
}

// A CPU tensor over a neuron tensor's memory (same storage bytes, sizes, strides, offset) that
// holds a reference to the neuron storage, so that it stays valid after the caller drops the
// neuron tensor: what torchneuron.distributed hands to gloo, which may still be working on it
// on its own threads after an async collective returns.
at::Tensor cpu_alias(const at::Tensor& neuron) {
  TORCH_CHECK(neuron.defined() && neuron.device().type() == c10::DeviceType::PrivateUse1,
              "_cpu_alias expects a neuron tensor, got ",
              neuron.defined() ? neuron.device().str() : std::string("an undefined tensor"));
  TORCH_CHECK(neuron.layout() == c10::kStrided && neuron.has_storage(),
              "_cpu_alias supports strided tensors only, got layout ", neuron.layout());
  const c10::Storage& storage = neuron.storage();
  auto* owner = new c10::Storage(storage);
  c10::DataPtr data(
      const_cast<void*>(storage.data()), owner,
      [](void* ctx) { delete static_cast<c10::Storage*>(ctx); }, c10::Device(c10::kCPU));
  c10::Storage cpu_storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.nbytes(), std::move(data),
      /*allocator=*/nullptr, /*resizable=*/false));
  auto cpu = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), neuron.dtype());
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(
      neuron.sizes(), neuron.strides(), neuron.storage_offset());
  if (neuron.is_conj()) cpu._set_conj(true);
  if (neuron.is_neg()) cpu._set_neg(true);
  return cpu;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchneuron core: allocator, device guard, hooks, kernels and fallback";

  m.def("_configure", [](int device_count, std::size_t hbm_bytes) {
    tn::rt::configure(device_count, hbm_bytes);
    tn::install_kernel_cpu_allocator();
    tn::register_hooks();
  });
  m.def("_is_configured", &tn::rt::configured);
  m.def("_device_count", &tn::rt::device_count);
  m.def("_hbm_capacity", &tn::rt::hbm_capacity);
  m.def("_get_device", [] { return static_cast<int>(tn::current_device()); });
  m.def("_set_device", [](int d) { tn::set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_check_device", [](int d) { tn::check_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_synchronize", [](int d) {
    tn::check_device(static_cast<c10::DeviceIndex>(d));
    tn::rt::synchronize(d);
  });

  m.def("_empty_cache", [] { tn::neuron_allocator().emptyCache(); });
  m.def("_mem_get_info", [](int d) {
    return tn::neuron_allocator().getMemoryInfo(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_set_memory_fraction", [](double fraction, int d) {
    tn::neuron_allocator().set_memory_fraction(fraction, static_cast<c10::DeviceIndex>(d));
  });
  m.def("_get_memory_fraction", [](int d) {
    return tn::neuron_allocator().memory_fraction(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_memory_snapshot", &memory_snapshot);
  m.def("_block_size", [] { return tn::NeuronCachingAllocator::kBlockSize; });

  m.def("_set_float64_policy", [](int policy, const std::vector<std::string>& exempt) {
    tn::set_float64_policy(static_cast<tn::Float64Policy>(policy), exempt);
  });

  m.def("_cpu_alias", &cpu_alias);
  // A bare CPython function, not pybind11's: its call overhead is what torch.compile pays.
  m.add_object("_empty_strided", py::reinterpret_steal<py::object>(tn::empty_strided_function()));
  m.def("_route_to_cpu_kernels", &tn::route_to_cpu_kernels);

  m.def("_autocast_op_lists", &tn::autocast_op_lists);

  m.def("_default_generator", [](int d) {
    return tn::default_generator(static_cast<c10::DeviceIndex>(d));
  });
}
