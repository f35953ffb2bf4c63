// DeviceGuardImpl for neuron: the current device and stream per thread, streams as ordering
// domains, and events that carry a device timestamp. Registered with C10_REGISTER_GUARD_IMPL;
// nothing calls into this file directly.
#include "device/CurrentDevice.h"
#include "aten/Accounting.h"
#include "aten/Launch.h"
#include "runtime/NeuronRuntime.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>

namespace torchneuron {
namespace {

constexpr int kMaxDevices = 64;
// Pool streams (getStreamFromGlobalPool) take ids [1, kPoolStreams]; new streams count on.
constexpr c10::StreamId kPoolStreams = 32;

// The current stream of each device for this thread (0 = the default stream).
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};

std::array<std::atomic<c10::StreamId>, kMaxDevices> g_next_stream_id;
std::array<std::atomic<c10::StreamId>, kMaxDevices> g_next_pool_stream;

struct NeuronEvent {
  c10::DeviceIndex device = -1;
  c10::EventFlag flag = c10::EventFlag::PYTORCH_DEFAULT;
  bool recorded = false;
  launch::Marker marker;  // where the event stands in its stream (complete once reached)
};

struct NeuronGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType static_type = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return static_type; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }

  c10::Device getDevice() const override { return c10::Device(static_type, current_device()); }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == static_type, "neuron guard got a ", d.type(), " device");
    set_current_device(d.index());
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < rt::device_count()) set_current_device(d.index());
  }

  c10::Stream getStream(c10::Device d) const override {
    const auto index = d.index() < 0 ? current_device() : d.index();
    check_device(index);  // indexes the per-device stream table below
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(static_type, index),
                       t_current_stream[index]);
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    const auto index = d.index() < 0 ? current_device() : d.index();
    check_device(index);
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(static_type, index));
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*isHighPriority*/) const override {
    const auto index = d.index() < 0 ? current_device() : d.index();
    check_device(index);
    const c10::StreamId id = 1 + (g_next_pool_stream[index]++ % kPoolStreams);
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(static_type, index), id);
  }

  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    const auto index = d.index() < 0 ? current_device() : d.index();
    check_device(index);
    const c10::StreamId id = 1 + kPoolStreams + g_next_stream_id[index]++;
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(static_type, index), id);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    const auto index = s.device_index();
    check_device(index);
    const c10::Stream old = getStream(s.device());
    t_current_stream[index] = s.id();
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(rt::device_count());
    } catch (...) {
      return 0;  // a bad configuration: no device (torch.neuron's calls say why)
    }
  }

  // Streams are queues of the runtime (runtime/Execution.h); with synchronous execution every
  // stream is drained when a call returns.
  bool queryStream(const c10::Stream& stream) const override {
    return launch::query_stream(stream);
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    launch::synchronize_stream(stream);
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const auto index = device_index < 0 ? current_device() : device_index;
    launch::synchronize_device(index);
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(), "Event device index ",
        int(device_index), " does not match recording stream's device index ",
        int(stream.device_index()), ".");
    auto* e = static_cast<NeuronEvent*>(*event);
    if (e == nullptr) {
      e = new NeuronEvent();
      e->device = stream.device_index();
      e->flag = flag;
      *event = e;
    }
    TORCH_CHECK(
        e->device == stream.device_index(), "Event device neuron:", int(e->device),
        " does not match recording stream's device neuron:", int(stream.device_index()), ".");
    e->recorded = true;
    e->marker = launch::record_marker(stream);
  }

  void block(void* event, const c10::Stream& stream) const override {
    auto* e = static_cast<NeuronEvent*>(event);
    if (e == nullptr) return;
    check_device(stream.device_index());
    launch::wait_marker(e->marker, stream);  // later work on `stream` waits for the event
  }

  bool queryEvent(void* event) const override {
    auto* e = static_cast<NeuronEvent*>(event);
    return e == nullptr || e->marker.done();
  }

  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<NeuronEvent*>(event);
    if (e == nullptr) return;
    if (accounting::enabled()) {
      accounting::sync(accounting::SyncCause::kEventSynchronize, "Event.synchronize", 0);
    }
    e->marker.wait();
    launch::raise_pending_error(e->device);
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<NeuronEvent*>(event);
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/)
      const override {
    auto* a = static_cast<NeuronEvent*>(start);
    auto* b = static_cast<NeuronEvent*>(end);
    TORCH_CHECK(
        a != nullptr && b != nullptr && a->recorded && b->recorded,
        "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(
        a->flag == c10::EventFlag::BACKEND_DEFAULT && b->flag == c10::EventFlag::BACKEND_DEFAULT,
        "Both events must be created with argument 'enable_timing=True'.");
    TORCH_CHECK(
        a->device == b->device, "Both events must be recorded on the same neuron device, got neuron:",
        int(a->device), " and neuron:", int(b->device), ".");
    // As CUDA's cudaEventElapsedTime, which answers "device not ready" before both completed.
    TORCH_CHECK(a->marker.done() && b->marker.done(), "neuron: the events have not completed "
                "yet; synchronize the end event (end.synchronize()) before elapsed_time, as on "
                "CUDA.");
    return static_cast<double>(b->marker.time_ns() - a->marker.time_ns()) / 1e6;
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream)
      const override {
    // Through c10's registry, so that the guard needs no allocator header.
    c10::getDeviceAllocator(static_type)->recordStream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace

}  // namespace torchneuron
