// torchneuron._C.device: the C++ device (csrc/device/): the hooks ATen asks, the device's
// lifecycle, the current device, synchronization, the caching allocator's figures and settings,
// storages shared between processes, the per-device generators and device graphs.
#include "python/Bindings.h"

#include "device/CurrentDevice.h"
#include "device/DeviceWork.h"
#include "device/Lifecycle.h"
#include "device/NeuronAllocator.h"
#include "device/NeuronGenerator.h"
#include "device/NeuronGraph.h"
#include "device/NeuronHooks.h"
#include "device/SharedStorage.h"

#include <torch/csrc/utils/pybind.h>

namespace torchneuron {
namespace {

py::list memory_snapshot() {
  std::vector<SegmentRecord> segments;
  {
    // Waiting for the allocator's lock without the GIL (see set_memory_fraction below).
    py::gil_scoped_release no_gil;
    segments = neuron_allocator().snapshot();
  }
  py::list out;
  for (const auto& s : segments) {
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

}  // namespace

void bind_device(py::module& parent) {
  py::module m = parent.def_submodule("device", "the C++ device (csrc/device/)");
  // A registration step: what ATen asks a device backend outside the dispatcher.
  m.def("register_hooks", &register_hooks);

  m.def("init", &mark_initialized);
  m.def("is_initialized", &is_initialized);
  m.def("is_in_bad_fork", &in_bad_fork);
  m.def("check_not_in_bad_fork", &check_not_in_bad_fork);
  m.def("get_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int64_t d) {
    check_device(d);
    set_current_device(static_cast<c10::DeviceIndex>(d));
  });
  m.def("check_device", [](int64_t d) { check_device(d); });
  // Waits release the GIL: queued work never needs it, but other Python threads may run.
  m.def("synchronize", &synchronize, py::call_guard<py::gil_scoped_release>());
  m.def("sleep", &sleep_on_current_stream, py::call_guard<py::gil_scoped_release>());

  m.def("empty_cache", [] { neuron_allocator().emptyCache(); },
        py::call_guard<py::gil_scoped_release>());
  m.def("mem_get_info", [](int d) {
    return neuron_allocator().getMemoryInfo(static_cast<c10::DeviceIndex>(d));
  });
  // Every binding that takes the allocator's lock waits for it without the GIL, so that other
  // Python threads run meanwhile (the allocator holds it while it empties its cache, which
  // waits for queued work).
  m.def("set_memory_fraction", [](double fraction, int d) {
    neuron_allocator().set_memory_fraction(fraction, static_cast<c10::DeviceIndex>(d));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("get_memory_fraction", [](int d) {
    return neuron_allocator().memory_fraction(static_cast<c10::DeviceIndex>(d));
  }, py::call_guard<py::gil_scoped_release>());
  m.def("memory_snapshot", &memory_snapshot);
  m.def("block_size", [] { return NeuronCachingAllocator::kBlockSize; });

  // torch.multiprocessing's reduction of neuron storages (torchneuron/device/ipc.py): `t` is a
  // tensor over the whole storage.
  // These take the allocator's lock (its statistics count shared blocks): without the GIL.
  m.def("share_storage", [](const at::Tensor& t) { return share_storage(t.storage()); },
        py::call_guard<py::gil_scoped_release>());
  m.def("is_shared_storage", [](const at::Tensor& t) { return is_shared_storage(t.storage()); });
  m.def("ipc_collect", &collect_released, py::call_guard<py::gil_scoped_release>());
  m.def("open_shared_storage", [](int fd, std::size_t nbytes, int device) {
    return open_shared_storage(fd, nbytes, static_cast<c10::DeviceIndex>(device));
  }, py::call_guard<py::gil_scoped_release>());

  m.def("default_generator", [](int d) {
    return device_generator(static_cast<c10::DeviceIndex>(d));
  });
  m.def("set_draws_from_cpu_generator", &set_draws_from_cpu_generator);
  m.def("draws_from_cpu_generator", &draws_from_cpu_generator);

  // Device graphs: NeuronGraph itself is torch.accelerator.Graph's implementation for neuron
  // (registered at run time, once the device has its name).
  m.def("register_graph_impl", &register_graph_impl);
  m.def("graph_pool_handle", [] {
    const auto id = graph_pool_handle();
    return py::make_tuple(id.first, id.second);
  });
  m.def("is_current_stream_capturing", &is_current_stream_capturing);
}

}  // namespace torchneuron
