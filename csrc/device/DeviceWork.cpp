#include "device/DeviceWork.h"

#include "aten/Launch.h"
#include "device/CurrentDevice.h"

#include <chrono>

namespace torchneuron {

void synchronize(int64_t device) {
  check_device(device);
  launch::synchronize_device(static_cast<c10::DeviceIndex>(device));
}

void sleep_on_current_stream(int64_t cycles) {
  const c10::DeviceIndex device = current_device();
  launch::enqueue(launch::current_stream(device), "neuron::_sleep", [cycles] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(cycles);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
}

}  // namespace torchneuron
