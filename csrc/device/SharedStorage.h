// Neuron storages shared between processes (torch.multiprocessing; see torchneuron/device/ipc.py).
// The sender moves a storage's bytes, once and in place, into device memory another process can
// map (rt::hbm_malloc_shared); the receiver maps the same memory through a descriptor of it. The
// memory is freed when the last process lets go (the kernel counts mappings and descriptors);
// it counts in the sending process's memory statistics only, until every process has let go
// (a block the sender dropped while a receiver holds it stays counted there).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>

#include <cstddef>

namespace torchneuron {

// The descriptor of `storage`'s shareable memory, moving its bytes there first if they are not
// yet (the storage keeps its identity: every tensor over it sees the shared memory). Owned by the
// storage: callers duplicate it to send it.
int share_storage(const c10::Storage& storage);

// Whether `storage`'s memory is shareable (moved by share_storage, or received from another
// process).
bool is_shared_storage(const c10::Storage& storage);

// A uint8 neuron tensor over `nbytes` of memory another process shared, mapped through `fd`
// (taken over) on `device`.
at::Tensor open_shared_storage(int fd, std::size_t nbytes, c10::DeviceIndex device);

// Frees the blocks this process shared and let go of whose receivers have all let go too (a
// receiver that died counts as let go); returns how many. Runs at every share and release, and
// as torch.neuron.ipc_collect() (torch.cuda.ipc_collect's name).
std::size_t collect_released();

}  // namespace torchneuron
