// The calling thread's current neuron device, and the one validation every device index goes
// through. The guard, the allocator, the generators and the hooks all build on this, so none of
// them needs another's header.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace torchneuron {

// Validated like CUDA: an index outside [0, device_count) raises IndexError naming neuron.
// Takes any integer, so that no caller narrows an index to 8 bits before it is checked.
void check_device(int64_t index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

// Scoped switch of the current device for the length of one kernel, without validation (the
// caller validated `index`); restores the previous device on exit, also when the kernel throws.
class CurrentDeviceScope {
 public:
  explicit CurrentDeviceScope(c10::DeviceIndex index);
  ~CurrentDeviceScope();
  CurrentDeviceScope(const CurrentDeviceScope&) = delete;
  CurrentDeviceScope& operator=(const CurrentDeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

}  // namespace torchneuron
