// Software NeuronCore: device memory is host memory drawn against a fixed HBM capacity per
// device. The capacity is enforced here, as a real device's memory is, so an over-allocation
// fails at the same point it would on the chip.
#include "NeuronRuntime.h"

#include "runtime/Execution.h"
#include "runtime/ProtectedMemory.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace torchneuron::rt {
namespace {

// Device memory is aligned like HBM allocations (and enough for any vector kernel).
constexpr std::size_t kAlignment = 64;
constexpr int kMaxDevices = 64;

struct DeviceState {
  std::size_t capacity = 0;
  std::atomic<std::size_t> in_use{0};
};

// Reading the host's free memory costs ~10 us, so it is asked for every allocation of at least
// kCheckAlways bytes and otherwise once per kCheckEvery bytes allocated since the last ask: a
// run of small allocations cannot exhaust the host between two asks by more than that.
constexpr std::size_t kCheckAlways = std::size_t(1) << 20;
constexpr std::size_t kCheckEvery = std::size_t(64) << 20;
std::atomic<std::size_t> g_unchecked_bytes{0};

int g_device_count = 0;
std::atomic<bool> g_configured{false};
std::atomic<void (*)()> g_configurator{nullptr};

// No lock around the configurator: it takes its own (a C++ lock held while it waits for the
// Python interpreter would deadlock against a thread that holds the interpreter and queries).
void ensure_configured() {
  if (g_configured.load(std::memory_order_acquire)) return;
  if (auto fn = g_configurator.load()) fn();
}
DeviceState g_devices[kMaxDevices];

constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();

// A "Key:   123 kB" line of /proc/meminfo, in bytes; kUnlimited when absent.
std::size_t meminfo_bytes(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  std::size_t kb = 0;
  while (in >> name >> kb) {
    std::getline(in, unit);
    if (name == key) return kb * 1024;
  }
  return kUnlimited;
}

// A number in a cgroup file; kUnlimited when absent, "max", or the v1 "no limit" value.
std::size_t cgroup_bytes(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return kUnlimited;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  return v >= (1ULL << 62) ? kUnlimited : static_cast<std::size_t>(v);
}

struct CgroupMemory {
  std::size_t limit, usage;
};

CgroupMemory cgroup_memory() {
  std::size_t limit = cgroup_bytes("/sys/fs/cgroup/memory.max");  // cgroup v2
  if (limit != kUnlimited) return {limit, cgroup_bytes("/sys/fs/cgroup/memory.current")};
  limit = cgroup_bytes("/sys/fs/cgroup/memory/memory.limit_in_bytes");  // cgroup v1
  if (limit != kUnlimited) return {limit, cgroup_bytes("/sys/fs/cgroup/memory/memory.usage_in_bytes")};
  return {kUnlimited, 0};
}

void check_device(int device) {
  ensure_configured();
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
  g_configured.store(true, std::memory_order_release);
}

void set_lazy_configurator(void (*fn)()) { g_configurator.store(fn); }

bool configured() { return g_configured; }

Capabilities capabilities() {
  // Protected memory is host-addressable inside the seam's windows only; its execution is
  // synchronous, so that every access of a kernel falls inside the window its launcher opened.
  if (memory_protected()) {
    return Capabilities{/*host_addressable_memory=*/true, /*queued_execution=*/false,
                        /*name=*/"software NeuronCore, memory protected"};
  }
  return Capabilities{/*host_addressable_memory=*/true, /*queued_execution=*/true,
                      /*name=*/"software NeuronCore"};
}

int device_count() {
  ensure_configured();
  return g_device_count;
}

std::size_t hbm_capacity(int device) {
  check_device(device);
  return g_devices[device].capacity;
}

std::size_t hbm_in_use(int device) {
  check_device(device);
  return g_devices[device].in_use.load();
}

std::size_t backing_memory_total() {
  return std::min(meminfo_bytes("MemTotal:"), cgroup_memory().limit);
}

std::size_t backing_memory_available() {
  std::size_t available = meminfo_bytes("MemAvailable:");
  const CgroupMemory cg = cgroup_memory();
  if (cg.limit != kUnlimited) available = std::min(available, cg.limit - std::min(cg.limit, cg.usage));
  return available;
}

void* hbm_malloc(int device, std::size_t bytes, MallocFailure* why) {
  check_device(device);
  DeviceState& d = g_devices[device];
  // The host must be able to back the bytes, or the kernel kills the process when they are
  // touched: refuse them here, where the caller can raise an out-of-memory error instead.
  if (bytes >= kCheckAlways || g_unchecked_bytes.fetch_add(bytes) + bytes >= kCheckEvery) {
    g_unchecked_bytes.store(0);
    const std::size_t available = backing_memory_available();
    if (bytes > available) {
      if (why != nullptr) *why = MallocFailure{true, available};
      return nullptr;
    }
  }
  // Reserve the bytes first so that two threads can never both pass the capacity check.
  std::size_t before = d.in_use.fetch_add(bytes);
  if (before + bytes > d.capacity) {
    d.in_use.fetch_sub(bytes);
    return nullptr;
  }
  std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = memory_protected()
                  ? protected_malloc(bytes)
                  : std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (ptr == nullptr) {
    d.in_use.fetch_sub(bytes);
  }
  return ptr;
}

void hbm_free(int device, void* ptr, std::size_t bytes) {
  check_device(device);
  if (memory_protected()) {
    protected_free(ptr, bytes);
  } else {
    std::free(ptr);
  }
  g_devices[device].in_use.fetch_sub(bytes);
}

namespace {

// Reserves `bytes` of the device's HBM (the same accounting hbm_malloc does), or says why not.
bool reserve_hbm(DeviceState& d, std::size_t bytes, MallocFailure* why) {
  const std::size_t available = backing_memory_available();
  if (bytes > available) {
    if (why != nullptr) *why = MallocFailure{true, available};
    return false;
  }
  if (d.in_use.fetch_add(bytes) + bytes > d.capacity) {
    d.in_use.fetch_sub(bytes);
    return false;
  }
  return true;
}

}  // namespace

namespace {

// Shared blocks are mapped by two processes, and the other process's windows are not this
// one's: the protected runtime refuses them rather than leave them unprotected.
void refuse_shared_when_protected(const char* what) {
  if (!memory_protected()) return;
  throw std::runtime_error(
      std::string("neuron: ") + what + " is not available under " + kMemoryProtectMode +
      ": device memory shared with another process would be host-accessible outside this "
      "process's seam; run without " + kMemoryProtectMode + " to share neuron tensors.");
}

}  // namespace

SharedHbm hbm_malloc_shared(int device, std::size_t bytes, MallocFailure* why) {
  check_device(device);
  refuse_shared_when_protected("sharing a neuron tensor with another process (IPC)");
  DeviceState& d = g_devices[device];
  if (!reserve_hbm(d, bytes, why)) return {};
  const std::size_t mapped = bytes == 0 ? 1 : bytes;
  const int fd = memfd_create("neuron-hbm", MFD_CLOEXEC);
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped)) == 0) {
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) return SharedHbm{p, fd};
  }
  if (fd >= 0) close(fd);
  d.in_use.fetch_sub(bytes);
  return {};
}

void hbm_free_shared(int device, SharedHbm block, std::size_t bytes) {
  check_device(device);
  hbm_unmap_shared(block, bytes);
  g_devices[device].in_use.fetch_sub(bytes);
}

namespace {

// The whole file, for the hold's lock.
struct flock whole_file(short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  return fl;
}

}  // namespace

SharedHbm hbm_map_shared(int fd, std::size_t bytes) {
  if (memory_protected()) close(fd);  // taken over, as on every other failure
  refuse_shared_when_protected("opening a neuron tensor another process shared (IPC)");
  void* p = mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    throw std::runtime_error(std::string("mapping shared neuron memory failed: ") +
                             std::strerror(errno));
  }
  // The hold: a read lock on an open file description of this process's own (reopened through
  // /proc), not on the received descriptor, whose description the sender shares: an OFD lock
  // conflicts only with other descriptions, and lives until this description is closed.
  const std::string self_path = "/proc/self/fd/" + std::to_string(fd);
  const int hold_fd = open(self_path.c_str(), O_RDWR | O_CLOEXEC);
  if (hold_fd >= 0) {
    struct flock fl = whole_file(F_RDLCK);
    fcntl(hold_fd, F_OFD_SETLK, &fl);  // without it the sender stops counting earlier
  }
  return SharedHbm{p, fd, hold_fd};
}

void hbm_unmap_shared(SharedHbm block, std::size_t bytes) {
  munmap(block.ptr, bytes == 0 ? 1 : bytes);
  close(block.fd);
  if (block.hold_fd >= 0) close(block.hold_fd);  // drops the hold
}

bool hbm_shared_elsewhere(const SharedHbm& block) {
  struct flock fl = whole_file(F_WRLCK);
  if (fcntl(block.fd, F_OFD_GETLK, &fl) != 0) return false;
  return fl.l_type != F_UNLCK;
}

void memcpy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  HostAccessWindow window;  // a copy is seam work: protected memory is accessible for it
  std::memcpy(dst, src, bytes);
}

std::int64_t clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace torchneuron::rt
