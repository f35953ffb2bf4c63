#include "device/CurrentDevice.h"

#include "runtime/NeuronRuntime.h"

#include <c10/util/Exception.h>

namespace torchneuron {
namespace {

thread_local c10::DeviceIndex t_current_device = 0;

}  // namespace

void check_device(int64_t index) {
  TORCH_CHECK_INDEX(
      index >= 0 && index < rt::device_count(), "neuron: invalid device index ", index,
      "; there are ", rt::device_count(), " neuron devices (neuron:0 .. neuron:",
      rt::device_count() - 1, ")");
}

c10::DeviceIndex current_device() { return t_current_device; }

void set_current_device(c10::DeviceIndex index) {
  check_device(index);
  t_current_device = index;
}

CurrentDeviceScope::CurrentDeviceScope(c10::DeviceIndex index) : previous_(t_current_device) {
  t_current_device = index;
}

CurrentDeviceScope::~CurrentDeviceScope() { t_current_device = previous_; }

}  // namespace torchneuron
