// DDP's runtime statistics for neuron modules. DDP's Reducer asks c10d's TimerRegistry for a
// timer of the module's device type; with none registered it warns on every rank that "time
// stats are currently only collected for CPU and CUDA devices" and logs no times. This timer
// does what CUDA's does: each event is a timing event recorded on the device's current stream,
// so the times are the device's (queued work included), and differences wait for both events.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <array>
#include <cstdint>
#include <optional>

namespace torchneuron {
namespace {

class NeuronTimer : public c10d::Timer {
 public:
  explicit NeuronTimer(c10::Device device)
      : device_(device),
        events_{make(), make(), make(), make(), make()} {}

  void record(Event event) override {
    // The host time too: DDP reads it (getTimestamp) for its forward start.
    Timer::record(event);
    c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);
    events_[index(event)].record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& a = events_[index(start)];
    c10::Event& b = events_[index(end)];
    // An event never recorded in this iteration (no communication, say) has no time.
    if (!a.was_marked_for_recording() || !b.was_marked_for_recording()) return std::nullopt;
    a.synchronize();
    b.synchronize();
    const double ms = a.elapsedTime(b);
    if (ms < 0) return std::nullopt;
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  static c10::Event make() {
    return c10::Event(c10::DeviceType::PrivateUse1, c10::EventFlag::BACKEND_DEFAULT);
  }
  static std::size_t index(Event event) { return static_cast<std::size_t>(event); }

  c10::Device device_;
  std::array<c10::Event, 5> events_;
};

}  // namespace
}  // namespace torchneuron

namespace c10d {
// (the macro names the registry without its namespace)
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torchneuron::NeuronTimer);
}  // namespace c10d
