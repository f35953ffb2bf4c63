// Work torch.neuron asks of a device as a whole, which the bindings only forward: waiting for
// everything queued on it (torch.neuron.synchronize) and keeping its current stream busy
// (torch.neuron._sleep, as torch.cuda._sleep).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace torchneuron {

// Checks the index (an IndexError-style c10 error for a device that does not exist), then waits
// until every stream of the device ran its queued and held work and raises its pending error.
void synchronize(int64_t device);

// Queues on the current device's current stream work that keeps the stream busy for about
// `cycles` nanoseconds (cycles of a 1 GHz clock); tests use it to have work still running.
// Under synchronous execution the caller spins.
void sleep_on_current_stream(int64_t cycles);

}  // namespace torchneuron
