// Software NeuronCore: device memory is host memory drawn against a fixed HBM capacity per
// device. The capacity is enforced here, as a real device's memory is, so an over-allocation
// fails at the same point it would on the chip.
#include "NeuronRuntime.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

namespace torchneuron::rt {
namespace {

// Device memory is aligned like HBM allocations (and enough for any vector kernel).
constexpr std::size_t kAlignment = 64;
constexpr int kMaxDevices = 64;

struct DeviceState {
  std::size_t capacity = 0;
  std::atomic<std::size_t> in_use{0};
};

int g_device_count = 0;
std::atomic<bool> g_configured{false};
DeviceState g_devices[kMaxDevices];

void check_device(int device) {
  if (device < 0 || device >= g_device_count) {
    throw std::out_of_range(
        "neuron runtime: device index " + std::to_string(device) + " is out of range (" +
        std::to_string(g_device_count) + " devices)");
  }
}

}  // namespace

void configure(int device_count, std::size_t hbm_bytes_per_device) {
  if (device_count < 0 || device_count > kMaxDevices) {
    throw std::invalid_argument(
        "neuron runtime: device count must be in [0, " + std::to_string(kMaxDevices) + "], got " +
        std::to_string(device_count));
  }
  g_device_count = device_count;
  for (int i = 0; i < kMaxDevices; ++i) {
    g_devices[i].capacity = i < device_count ? hbm_bytes_per_device : 0;
  }
  g_configured = true;
}

bool configured() { return g_configured; }

Capabilities capabilities() {
  return Capabilities{/*host_addressable_memory=*/true, /*name=*/"software NeuronCore"};
}

int device_count() { return g_device_count; }

std::size_t hbm_capacity(int device) {
  check_device(device);
  return g_devices[device].capacity;
}

std::size_t hbm_in_use(int device) {
  check_device(device);
  return g_devices[device].in_use.load();
}

void* hbm_malloc(int device, std::size_t bytes) {
  check_device(device);
  DeviceState& d = g_devices[device];
  // Reserve the bytes first so that two threads can never both pass the capacity check.
  std::size_t before = d.in_use.fetch_add(bytes);
  if (before + bytes > d.capacity) {
    d.in_use.fetch_sub(bytes);
    return nullptr;
  }
  std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (ptr == nullptr) {
    d.in_use.fetch_sub(bytes);
  }
  return ptr;
}

void hbm_free(int device, void* ptr, std::size_t bytes) {
  check_device(device);
  std::free(ptr);
  g_devices[device].in_use.fetch_sub(bytes);
}

void memcpy(void* dst, const void* src, std::size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void synchronize(int device) { check_device(device); }

std::int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace torchneuron::rt
