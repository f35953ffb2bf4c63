// The hardware seam. Everything above this header talks to a NeuronCore only through these
// calls; the software NeuronCore in NeuronRuntime.cpp implements them on host memory, and a
// real-hardware runtime would implement the same calls on the chip's driver.
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
  // The runtime's name, for error messages.
  const char* name;
};
Capabilities capabilities();

// Set once, before the first device call, from the Python configuration (profile + env).
void configure(int device_count, std::size_t hbm_bytes_per_device);
bool configured();

int device_count();
std::size_t hbm_capacity(int device);
std::size_t hbm_in_use(int device);

// Raw device memory, like cudaMalloc/cudaFree: returns nullptr when the device's HBM is full.
void* hbm_malloc(int device, std::size_t bytes);
void hbm_free(int device, void* ptr, std::size_t bytes);

// Host <-> device and device <-> device transfers.
void memcpy(void* dst, const void* src, std::size_t bytes);

// Kernels on the software NeuronCore run to completion on the issuing thread, so a device is
// idle whenever control returns to the caller; a hardware runtime would block here.
void synchronize(int device);

// Monotonic device clock in nanoseconds (event timestamps).
std::int64_t clock_ns();

}  // namespace torchneuron::rt
