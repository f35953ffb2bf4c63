// Fork safety for the runtime and the layers above: every lock that another thread may hold
// while a thread forks is registered here; a fork waits until it can take them all, and both
// sides release them after, so a child never inherits a lock held by a thread that does not
// exist in it. (Whether the child may use the device is the device layer's rule:
// csrc/device/Lifecycle.h.)
#pragma once

#include <mutex>

namespace torchneuron::rt {

// Registers `m` (a mutex that lives until the process ends) to be held across fork(). Call
// once per mutex, e.g. from a static initializer next to the mutex.
void hold_across_fork(std::mutex& m);

}  // namespace torchneuron::rt
