// The device's lifecycle in a process, as CUDA's: device state is created at its first use
// (the first allocation of device memory, or torch.neuron.init()), and a process forked from a
// parent that had created it may not use the device (its memory, queues and locks belong to the
// parent): its first device use raises an error naming the cure, as CUDA's "Cannot re-initialize
// CUDA in forked subprocess". A child that never touches neuron works.
// (Locks held across a fork: runtime/ForkSafety.h.)
#pragma once

namespace torchneuron {

// Marks device state as created (idempotent, cheap after the first call). Raises in a bad fork.
void mark_initialized();
bool is_initialized();
// True in a process forked from a parent whose device state existed at the fork.
bool in_bad_fork();
// Raises RuntimeError, naming 'spawn' and 'forkserver', in a bad fork; otherwise nothing.
void check_not_in_bad_fork();

}  // namespace torchneuron
