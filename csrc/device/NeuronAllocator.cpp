#include "device/NeuronAllocator.h"

#include "device/CurrentDevice.h"
#include "aten/Launch.h"
#include "device/Lifecycle.h"
#include "runtime/ForkSafety.h"
#include "profiler/MemoryHistory.h"
#include "profiler/PythonLine.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/ProtectedMemory.h"

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

namespace torchneuron {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr int kMaxDevices = 64;

struct LiveBlock {
  c10::DeviceIndex device;
  std::size_t size;
  std::size_t requested;
  c10::StreamId stream;  // the stream current at the allocation
  c10::SmallVector<c10::StreamId, 1> recorded;  // record_stream()'s other streams
  // Set when work queued on `stream` uses the block without a reference (use_in_stream_order).
  const rt::StreamClock* ordered = nullptr;
};

// A cached block. Freed while work queued on a stream may still use it (`clock` set), it goes
// only to allocations for later work on that stream until the stream's worker reached
// `position` (the items queued on it when the block was freed).
struct FreeBlock {
  void* ptr;
  const rt::StreamClock* clock;
  std::uint64_t position;
  bool free_for(const rt::StreamClock* ordered_for) const {
    return clock == nullptr || clock == ordered_for || clock->reached(position);
  }
};

// The stream whose later work this thread's allocations are for (StreamOrderedAllocations).
thread_local const rt::StreamClock* t_ordered_for = nullptr;

// A block freed by a stream's worker (the queued work held the last reference: the program had
// dropped the tensor while that stream still used it) that was allocated on another stream and
// not recorded on the one that used it: CUDA's caching allocator would have handed the memory to
// new allocations on the allocating stream at once, racing with the other stream's work. Here
// the queue kept it alive; the program is told once per pair of streams.
void warn_free_while_in_use(c10::DeviceIndex device, c10::StreamId allocated,
                            c10::StreamId used) {
  static std::mutex m;
  static std::set<std::pair<c10::StreamId, c10::StreamId>> told;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!told.insert({allocated, used}).second) return;
  }
  TORCH_WARN("neuron:", int(device), ": a tensor allocated on stream ", allocated,
             " was freed while stream ", used, " still used it. On CUDA its memory could be "
             "reused by new work on stream ", allocated, " before stream ", used,
             " finished with it (a use after free); call tensor.record_stream(stream) for the "
             "stream that uses it, or keep the tensor until that stream's work is done.");
}

struct DeviceCache {
  // size -> cached free blocks of exactly that size (blocks are never split, so the figures
  // stay exact: an allocation of N bytes holds round_up(N, kBlockSize) bytes).
  std::unordered_map<std::size_t, std::vector<FreeBlock>> free_blocks;
  std::size_t cached_bytes = 0;
  std::size_t cached_count = 0;
  DeviceStats stats;
  double fraction = 1.0;
};

// One lock for the whole allocator: a block's device must be found from its pointer alone
// (raw deleters get nothing else), and the critical sections are a few hash operations.
std::mutex g_mutex;
// A fork waits for it (a child must never inherit it locked: its tensors free through it).
[[maybe_unused]] const bool g_mutex_fork_safe = (rt::hold_across_fork(g_mutex), true);
std::unordered_map<void*, LiveBlock> g_live;
// g_live's nodes of freed blocks, reused by the next allocations: a node per allocation would
// cost a malloc and a free inside every tensor's life (an op of a few floats feels it). Bounded,
// so that a burst of frees does not keep its nodes forever. Never destroyed, so that it adds no
// static-destruction window in which a late free would find it gone.
auto& g_spare_nodes = *new std::vector<std::unordered_map<void*, LiveBlock>::node_type>();
constexpr std::size_t kMaxSpareNodes = 1024;

// Records a live block (caller holds g_mutex), in a spare node where there is one.
void insert_live_locked(void* p, LiveBlock block) {
  if (g_spare_nodes.empty()) {
    g_live.emplace(p, std::move(block));
    return;
  }
  auto node = std::move(g_spare_nodes.back());
  g_spare_nodes.pop_back();
  node.key() = p;
  node.mapped() = std::move(block);
  g_live.insert(std::move(node));
}

// Forgets a live block (caller holds g_mutex), keeping its node for the next allocation.
void erase_live_locked(std::unordered_map<void*, LiveBlock>::iterator it) {
  auto node = g_live.extract(it);
  if (g_spare_nodes.size() < kMaxSpareNodes) g_spare_nodes.push_back(std::move(node));
}
DeviceCache g_devices[kMaxDevices];

std::size_t round_size(std::size_t nbytes) {
  const std::size_t b = NeuronCachingAllocator::kBlockSize;
  return (nbytes + b - 1) / b * b;
}

// Applies `fn` to the aggregate stat and to the pool (small/large) the size belongs to.
template <typename Fn>
void for_pools(std::size_t size, Fn fn) {
  fn(static_cast<std::size_t>(StatType::AGGREGATE));
  fn(static_cast<std::size_t>(
      size <= NeuronCachingAllocator::kSmallBlockLimit ? StatType::SMALL_POOL
                                                       : StatType::LARGE_POOL));
}

// Every per-pool statistic of a device (the counters that reset_* apply to).
template <typename Fn>
void for_each_stat(DeviceStats& s, Fn fn) {
  for (std::size_t i = 0; i < s.allocation.size(); ++i) {
    for (auto* stat : {&s.allocation[i], &s.segment[i], &s.active[i], &s.inactive_split[i],
                       &s.allocated_bytes[i], &s.reserved_bytes[i], &s.active_bytes[i],
                       &s.inactive_split_bytes[i], &s.requested_bytes[i]}) {
      fn(*stat);
    }
  }
}

std::string format_bytes(std::size_t bytes) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (bytes >= (std::size_t(1) << 30)) {
    os << static_cast<double>(bytes) / (1 << 30) << " GiB";
  } else if (bytes >= (std::size_t(1) << 20)) {
    os << static_cast<double>(bytes) / (1 << 20) << " MiB";
  } else {
    os << bytes << " bytes";
  }
  return os.str();
}

// Returns the cached blocks of `device` to the runtime, but for those that queued work may still
// use (freed in stream order, their stream not yet past the mark). Caller holds g_mutex.
void release_cache_locked(c10::DeviceIndex device) {
  DeviceCache& dc = g_devices[device];
  for (auto& [size, blocks] : dc.free_blocks) {
    std::vector<FreeBlock> kept;
    for (const FreeBlock& b : blocks) {
      if (!b.free_for(nullptr)) {
        kept.push_back(b);
        continue;
      }
      rt::hbm_free(device, b.ptr, size);
      profiler::memory_event(profiler::MemoryAction::kSegmentFree, device, b.ptr, size);
      for_pools(size, [&](std::size_t i) {
        dc.stats.reserved_bytes[i].decrease(size);
        dc.stats.segment[i].decrease(1);
      });
      dc.stats.num_device_free++;
      dc.cached_bytes -= size;
      dc.cached_count--;
    }
    blocks = std::move(kept);
  }
}

// Counts (allocated=true) or uncounts one allocation of `size` bytes, `requested` of them asked
// for, in the device's statistics. Caller holds g_mutex.
void count_allocation_locked(DeviceStats& s, std::size_t size, std::size_t requested,
                             bool allocated) {
  auto change = [allocated](c10::CachingAllocator::Stat& stat, std::size_t amount) {
    allocated ? stat.increase(amount) : stat.decrease(amount);
  };
  for_pools(size, [&](std::size_t i) {
    change(s.allocation[i], 1);
    change(s.allocated_bytes[i], size);
    change(s.active[i], 1);
    change(s.active_bytes[i], size);
    change(s.requested_bytes[i], requested);
  });
}

// An allocation that failed: the CUDA-like message, and what the out-of-memory hook is told.
struct OutOfMemory {
  std::string message;
  std::size_t usable;  // the bytes the allocator may use on the device
};

// Counts and records an out-of-memory and writes its message. Caller holds g_mutex; the hook's
// tail is added by the caller after the lock is released (see allocate_on).
OutOfMemory out_of_memory(c10::DeviceIndex device, std::size_t size, std::size_t usable,
                          const std::string& reason) {
  DeviceCache& dc = g_devices[device];
  const auto agg = static_cast<std::size_t>(StatType::AGGREGATE);
  const std::size_t capacity = rt::hbm_capacity(device);
  const std::size_t in_use = rt::hbm_in_use(device);
  const std::size_t allocated = dc.stats.allocated_bytes[agg].current;
  const std::size_t reserved = dc.stats.reserved_bytes[agg].current;
  dc.stats.num_ooms++;
  profiler::memory_event(profiler::MemoryAction::kOom, device, nullptr, size);
  std::ostringstream msg;
  msg << "neuron out of memory. Tried to allocate " << format_bytes(size) << ". neuron:"
      << int(device) << " has a total capacity of " << format_bytes(capacity) << " of which "
      << format_bytes(capacity - in_use) << " is free. " << reason
      << "Of the allocated memory " << format_bytes(allocated)
      << " is allocated by PyTorch, and " << format_bytes(reserved - allocated)
      << " is reserved by PyTorch but unallocated.";
  return {msg.str(), usable};
}

// Takes a block of `size` bytes for `device`: a cached one if there is one, else fresh device
// memory, emptying the cache once before giving up; nullptr, with `oom` set, when there is
// none. Caller holds g_mutex.
void* take_block_locked(c10::DeviceIndex device, std::size_t size,
                        std::optional<OutOfMemory>& oom) {
  DeviceCache& dc = g_devices[device];
  auto it = dc.free_blocks.find(size);
  if (it != dc.free_blocks.end()) {
    auto& blocks = it->second;
    for (std::size_t i = blocks.size(); i-- > 0;) {  // the latest freed first
      if (!blocks[i].free_for(t_ordered_for)) continue;
      void* p = blocks[i].ptr;
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      dc.cached_bytes -= size;
      dc.cached_count--;
      return p;
    }
  }
  const auto agg = static_cast<std::size_t>(StatType::AGGREGATE);
  const std::size_t limit = dc.fraction < 1.0
      ? static_cast<std::size_t>(dc.fraction * rt::hbm_capacity(device))
      : rt::hbm_capacity(device);
  if (dc.fraction < 1.0) {
    if (dc.stats.reserved_bytes[agg].current + size > limit && dc.cached_count > 0) {
      dc.stats.num_alloc_retries++;
      release_cache_locked(device);
    }
    if (dc.stats.reserved_bytes[agg].current + size > limit) {
      std::ostringstream reason;
      reason << "This process is limited to " << format_bytes(limit)
             << " by set_per_process_memory_fraction(" << dc.fraction << "). ";
      oom = out_of_memory(device, size, limit, reason.str());
      return nullptr;
    }
  }
  rt::MallocFailure why;
  void* p = rt::hbm_malloc(device, size, &why);
  if (p == nullptr && dc.cached_count > 0) {
    dc.stats.num_alloc_retries++;
    release_cache_locked(device);
    why = rt::MallocFailure();
    p = rt::hbm_malloc(device, size, &why);
  }
  if (p == nullptr) {
    std::ostringstream reason;
    if (why.backing_exhausted) {
      reason << "The host memory that backs the software NeuronCore's HBM has only "
             << format_bytes(why.backing_available) << " available (of "
             << format_bytes(rt::backing_memory_total())
             << "), less than the configured HBM capacity allows; lower NEURON_HBM_BYTES or "
                "free host memory. ";
    }
    oom = out_of_memory(device, size, limit, reason.str());
    return nullptr;
  }
  for_pools(size, [&](std::size_t i) {
    dc.stats.reserved_bytes[i].increase(size);
    dc.stats.segment[i].increase(1);
  });
  dc.stats.num_device_alloc++;
  profiler::memory_event(profiler::MemoryAction::kSegmentAlloc, device, p, size);
  return p;
}

}  // namespace

// On the current device: a neuron op's kernel runs with its device current (see
// csrc/aten/KernelScope.h), so its allocations land there.
void NeuronCachingAllocator::count_shared(c10::DeviceIndex device, std::size_t bytes,
                                          bool allocated) {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceStats& s = g_devices[device].stats;
  for_pools(bytes, [&](std::size_t i) {
    for (auto* count : {&s.allocation[i], &s.active[i], &s.segment[i]}) {
      allocated ? count->increase(1) : count->decrease(1);
    }
    for (auto* total : {&s.allocated_bytes[i], &s.active_bytes[i], &s.reserved_bytes[i],
                        &s.requested_bytes[i]}) {
      allocated ? total->increase(bytes) : total->decrease(bytes);
    }
  });
}

c10::DataPtr NeuronCachingAllocator::allocate(std::size_t nbytes) {
  const c10::DeviceIndex device = current_device();
  return allocate_on(device, nbytes, c10::Device(c10::DeviceType::PrivateUse1, device));
}

c10::DataPtr NeuronCachingAllocator::allocate_on(
    c10::DeviceIndex device, std::size_t nbytes, c10::Device label) {
  check_device(device);
  mark_initialized();  // the first device memory creates device state; refused in a bad fork
  if (nbytes == 0) return c10::DataPtr(nullptr, label);
  const std::size_t size = round_size(nbytes);
  void* p;
  std::size_t allocated_total = 0, reserved_total = 0;  // set with the block, under the lock
  auto frames = profiler::gather_memory_frames();  // before the lock (see MemoryHistory.h)
  const c10::StreamId stream = launch::current_stream(device).id();
  std::optional<OutOfMemory> oom;
  {
    // A lock guard, so that any throw leaves the allocator unlocked.
    std::lock_guard<std::mutex> lock(g_mutex);
    p = take_block_locked(device, size, oom);
    if (p != nullptr) {
      DeviceCache& dc = g_devices[device];
      insert_live_locked(p, LiveBlock{device, size, nbytes, stream, {}});
      count_allocation_locked(dc.stats, size, nbytes, /*allocated=*/true);
      allocated_total = dc.stats.allocated_bytes[0].current;
      reserved_total = dc.stats.reserved_bytes[0].current;
      profiler::memory_event(profiler::MemoryAction::kAlloc, device, p, size, nbytes,
                             std::move(frames));
    }
  }
  if (oom) {
    // The hook's tail is written without the lock: the hook runs Python (the memory advisor)
    // and takes the GIL, and a thread holding the GIL may be waiting for this lock (any tensor
    // freed from Python is), which would deadlock with it.
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     oom->message + profiler::on_oom(device, size, oom->usable));
  }
  // Under NEURON_MEMORY_PROTECT=1, the fault message names the Python line that allocated the
  // block a stray access falls in (outside the lock: the line's walk may take the GIL).
  if (rt::memory_protected()) rt::note_allocation_site(p, profiler::user_python_line().c_str());
  const c10::Device neuron_device(c10::DeviceType::PrivateUse1, device);
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(
        p, static_cast<int64_t>(size), allocated_total, reserved_total, neuron_device);
  }
  return c10::DataPtr(p, p, &NeuronCachingAllocator::free_block, label);
}

void NeuronCachingAllocator::free_block(void* ptr) {
  if (ptr == nullptr) return;
  c10::DeviceIndex device;
  std::size_t size, allocated_total, reserved_total;
  std::optional<std::pair<c10::StreamId, c10::StreamId>> unrecorded;
  auto frames = profiler::gather_memory_frames();  // before the lock (see MemoryHistory.h)
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_live.find(ptr);
    TORCH_INTERNAL_ASSERT(it != g_live.end(), "neuron: freeing memory the allocator does not own");
    device = it->second.device;
    size = it->second.size;
    const std::size_t requested = it->second.requested;
    if (launch::on_worker_thread()) {
      const c10::StreamId used = launch::current_stream(device).id();
      const auto& recorded = it->second.recorded;
      if (used != it->second.stream &&
          std::find(recorded.begin(), recorded.end(), used) == recorded.end()) {
        unrecorded = {it->second.stream, used};
      }
    }
    const rt::StreamClock* ordered = it->second.ordered;
    erase_live_locked(it);
    DeviceCache& dc = g_devices[device];
    count_allocation_locked(dc.stats, size, requested, /*allocated=*/false);
    dc.free_blocks[size].push_back(FreeBlock{
        ptr, ordered, ordered ? ordered->queued.load(std::memory_order_acquire) : 0});
    profiler::memory_event(profiler::MemoryAction::kFree, device, ptr, size, requested,
                           std::move(frames));
    dc.cached_bytes += size;
    dc.cached_count++;
    allocated_total = dc.stats.allocated_bytes[0].current;
    reserved_total = dc.stats.reserved_bytes[0].current;
  }
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(
        ptr, -static_cast<int64_t>(size), allocated_total, reserved_total,
        c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  if (unrecorded) warn_free_while_in_use(device, unrecorded->first, unrecorded->second);
}

c10::DeleterFnPtr NeuronCachingAllocator::raw_deleter() const { return &free_block; }

void NeuronCachingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  launch::settle();  // a storage copy on the calling thread: after queued work
  rt::memcpy(dest, src, count);
}

void NeuronCachingAllocator::emptyCache(c10::MempoolId_t /*mempool_id*/) {
  launch::drain_all();  // blocks freed while queued work used them are released too, as on CUDA
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int d = 0; d < rt::device_count(); ++d) release_cache_locked(d);
}

// Work queued on a stream other than a block's own holds references to the memory it uses (only
// the block's own stream uses it unreferenced, see use_in_stream_order), so a block is never
// reused while another stream's work is in flight: there is nothing to defer. The record says
// the program took care, so freeing it from that stream's work is no use after free; a recorded
// block is never used unreferenced.
void NeuronCachingAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(ptr.get());
  if (it == g_live.end() || it->second.stream == stream.id()) return;
  auto& recorded = it->second.recorded;
  if (std::find(recorded.begin(), recorded.end(), stream.id()) == recorded.end()) {
    recorded.push_back(stream.id());
  }
}

bool NeuronCachingAllocator::use_in_stream_order(const c10::Storage& storage,
                                                 const c10::Stream& stream,
                                                 const rt::StreamClock* clock) {
  const c10::DataPtr& data = storage.data_ptr();
  if (data.get_deleter() != &free_block || data.get() == nullptr) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(data.get());
  if (it == g_live.end()) return false;
  LiveBlock& b = it->second;
  if (b.device != stream.device_index() || b.stream != stream.id() || !b.recorded.empty()) {
    return false;
  }
  b.ordered = clock;
  return true;
}

NeuronCachingAllocator::StreamOrderedAllocations::StreamOrderedAllocations(
    const rt::StreamClock* clock)
    : previous_(std::exchange(t_ordered_for, clock)) {}

NeuronCachingAllocator::StreamOrderedAllocations::~StreamOrderedAllocations() {
  t_ordered_for = previous_;
}

c10::CachingDeviceAllocator::DeviceStats NeuronCachingAllocator::getDeviceStats(
    c10::DeviceIndex device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_devices[device].stats;
}

void NeuronCachingAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceStats& s = g_devices[device].stats;
  for_each_stat(s, [](c10::CachingAllocator::Stat& stat) { stat.reset_accumulated(); });
  s.num_alloc_retries = 0;
  s.num_ooms = 0;
  s.num_device_alloc = 0;
  s.num_device_free = 0;
  s.oversize_allocations.reset_accumulated();
  s.oversize_segments.reset_accumulated();
}

void NeuronCachingAllocator::resetPeakStats(c10::DeviceIndex device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceStats& s = g_devices[device].stats;
  for_each_stat(s, [](c10::CachingAllocator::Stat& stat) { stat.reset_peak(); });
  s.oversize_allocations.reset_peak();
  s.oversize_segments.reset_peak();
}

std::pair<std::size_t, std::size_t> NeuronCachingAllocator::getMemoryInfo(
    c10::DeviceIndex device) {
  check_device(device);
  // Free is what an allocation could get: the device's free HBM, or less where the memory that
  // backs it (host memory on the software NeuronCore) has less available.
  const std::size_t total = rt::hbm_capacity(device);
  const std::size_t free = std::min(total - rt::hbm_in_use(device), rt::backing_memory_available());
  return {free, total};
}

void NeuronCachingAllocator::set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device(device);
  TORCH_CHECK_VALUE(
      fraction >= 0.0 && fraction <= 1.0, "neuron: invalid memory fraction ", fraction,
      ", it must be in [0, 1]");
  std::lock_guard<std::mutex> lock(g_mutex);
  g_devices[device].fraction = fraction;
}

double NeuronCachingAllocator::memory_fraction(c10::DeviceIndex device) {
  check_device(device);
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_devices[device].fraction;
}

c10::DeviceIndex NeuronCachingAllocator::device_of(const void* ptr) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_live.find(const_cast<void*>(ptr));
  return it == g_live.end() ? -1 : it->second.device;
}

std::vector<SegmentRecord> NeuronCachingAllocator::snapshot() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<SegmentRecord> out;
  for (const auto& [p, b] : g_live) {
    out.push_back({b.device, reinterpret_cast<std::size_t>(p), b.size, b.requested, true});
  }
  for (int d = 0; d < rt::device_count(); ++d) {
    for (const auto& [size, blocks] : g_devices[d].free_blocks) {
      for (const FreeBlock& b : blocks) {
        out.push_back({static_cast<c10::DeviceIndex>(d), reinterpret_cast<std::size_t>(b.ptr),
                       size, 0, false});
      }
    }
  }
  return out;
}

NeuronCachingAllocator& neuron_allocator() {
  static NeuronCachingAllocator instance;
  return instance;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &neuron_allocator());

}  // namespace torchneuron
