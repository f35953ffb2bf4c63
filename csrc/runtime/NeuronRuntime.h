// The hardware seam. Everything above this header talks to a NeuronCore only through these
// calls and those of Execution.h (streams, markers, errors of queued work); the software
// NeuronCore (NeuronRuntime.cpp, Execution.cpp) implements them on host memory and host
// threads, and a real-hardware runtime would implement the same calls on the chip's driver.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torchneuron::rt {

// What a runtime's hardware can do that the layers above must not assume. Asked in one place
// above the seam (csrc/aten/HostAccess.h); everything that treats device memory as host memory
// goes through there, so a runtime that cannot offer it fails there, with one clear error.
struct Capabilities {
  // A CPU thread may read and write device memory in place through its address: the CPU kernels
  // of the boxed fallback, the native fast paths, Inductor's CPU code on neuron buffers and
  // gloo's zero-copy collectives all rely on it. True for the software NeuronCore (its HBM is a
  // host-memory arena); a Trainium runtime would say false and move bytes with memcpy only.
  bool host_addressable_memory;
  // Work queued on a stream runs later, in order, on the device (Execution.h), and the caller's
  // thread returns at once. True for the software NeuronCore (a worker thread per stream); a
  // runtime without queues would say false and the layer above would run every op in place.
  bool queued_execution;
  // The runtime's name, for error messages.
  const char* name;
};
Capabilities capabilities();

// Set once, from the Python configuration (profile + env): by torch.neuron's first call, or
// lazily, through the configurator, by the first device query that finds the runtime
// unconfigured (a neuron tensor made before any torch.neuron call).
void configure(int device_count, std::size_t hbm_bytes_per_device);
bool configured();
// `fn` reads the configuration and calls configure(), or throws (a bad configuration): the
// error reaches the device query's caller, and the next query asks again.
void set_lazy_configurator(void (*fn)());

int device_count();
std::size_t hbm_capacity(int device);
std::size_t hbm_in_use(int device);

// Why hbm_malloc returned nullptr.
struct MallocFailure {
  // The memory that backs device memory could not provide the bytes, although the device's HBM
  // capacity could (the software NeuronCore on a host with less free memory than its HBM).
  bool backing_exhausted = false;
  std::size_t backing_available = 0;  // bytes it could still provide, when backing_exhausted
};

// Raw device memory, like cudaMalloc/cudaFree: returns nullptr when the device's HBM is full,
// or when the memory backing it cannot provide the bytes (then `why` says so).
void* hbm_malloc(int device, std::size_t bytes, MallocFailure* why = nullptr);
void hbm_free(int device, void* ptr, std::size_t bytes);

// Device memory another process can map (what CUDA's IPC handles give): a block backed by an
// anonymous shared-memory file, mapped here; `fd` is what travels to the other process. The
// memory lives until every process has unmapped it and closed its descriptor (the kernel counts
// the references), so a process that dies holding it leaks nothing. Counted in hbm_in_use of
// the allocating process only; nullptr ptr when the HBM is full or the host cannot back it.
struct SharedHbm {
  void* ptr = nullptr;
  int fd = -1;
  int hold_fd = -1;  // a mapping process's own open of the file, carrying its hold (below)
};
SharedHbm hbm_malloc_shared(int device, std::size_t bytes, MallocFailure* why = nullptr);
void hbm_free_shared(int device, SharedHbm block, std::size_t bytes);
// Maps `bytes` of a block another process shared, through a descriptor of its file (taken over:
// closed by hbm_unmap_shared), and marks it held by this process until hbm_unmap_shared or the
// process's end. Throws std::runtime_error when the mapping fails.
SharedHbm hbm_map_shared(int fd, std::size_t bytes);
void hbm_unmap_shared(SharedHbm block, std::size_t bytes);
// Whether another process still maps the allocating process's `block` (what CUDA's IPC
// reference counts answer). A hold is a read lock on the receiver's own open of the file, which
// the kernel drops when that process ends, so a process killed while holding stops counting.
bool hbm_shared_elsewhere(const SharedHbm& block);

// The memory behind device memory: for the software NeuronCore, host memory ("available" is
// MemAvailable, and the cgroup's limit less its usage where a limit is set); a runtime whose
// device memory is separate answers SIZE_MAX for both.
std::size_t backing_memory_total();
std::size_t backing_memory_available();

// Host <-> device and device <-> device transfers.
void memcpy(void* dst, const void* src, std::size_t bytes);

// Monotonic device clock in nanoseconds (event timestamps).
std::int64_t clock_ns();

}  // namespace torchneuron::rt
