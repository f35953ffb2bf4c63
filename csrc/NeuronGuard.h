// DeviceGuardImpl for neuron: the current device and stream per thread, streams as ordering
// domains, and events that carry a device timestamp.
#pragma once

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchneuron {

// Validated like CUDA: an index outside [0, device_count) raises IndexError naming neuron.
void check_device(c10::DeviceIndex index);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);

}  // namespace torchneuron
