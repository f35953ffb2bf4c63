// The neuron caching allocator: device memory comes from the runtime seam (HBM capacity is
// enforced there) and freed blocks are cached per device and size, so the steady state of a
// training loop is a free-list hit. It derives from c10::DeviceAllocator so that
// torch.accelerator.memory_* and the profiler see it.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <utility>
#include <vector>

namespace torchneuron {

namespace rt {
struct StreamClock;
}

struct SegmentRecord {
  c10::DeviceIndex device;
  std::size_t address;
  std::size_t size;
  std::size_t requested;
  bool allocated;
};

class NeuronCachingAllocator final : public c10::DeviceAllocator {
 public:
  // Every neuron block is rounded up to this many bytes; memory_allocated moves in these steps.
  static constexpr std::size_t kBlockSize = 512;
  // Blocks up to this size count in the "small_pool" statistics, like CUDA's.
  static constexpr std::size_t kSmallBlockLimit = 1 << 20;

  c10::DataPtr allocate(std::size_t nbytes) override;
  // Allocates on `device`; `label` is the device written into the DataPtr (CPU while a CPU
  // kernel runs on the memory, see csrc/aten/KernelScope.h; the neuron device otherwise).
  c10::DataPtr allocate_on(c10::DeviceIndex device, std::size_t nbytes, c10::Device label);
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<std::size_t, std::size_t> getMemoryInfo(c10::DeviceIndex device) override;

  void set_memory_fraction(double fraction, c10::DeviceIndex device);
  double memory_fraction(c10::DeviceIndex device);
  // The device a block of neuron memory belongs to, or -1 when `ptr` is not neuron memory.
  c10::DeviceIndex device_of(const void* ptr);
  std::vector<SegmentRecord> snapshot();

  // Counts (allocated=true) or uncounts a block of shareable memory this process allocated
  // outside the cache (csrc/device/SharedStorage.h) in the device's statistics, as one segment
  // with one allocation, so that memory_allocated/memory_reserved keep seeing it.
  void count_shared(c10::DeviceIndex device, std::size_t bytes, bool allocated);
  // Frees a block: the deleter of every DataPtr this allocator hands out.
  static void free_block(void* ptr);

  // Stream-ordered reuse, as CUDA's caching allocator does it. Queued work may use a block of
  // its own stream without holding a reference to it (csrc/aten/DeferredOp.cpp): the program's
  // free then returns the block at once, marked with its stream's clock at that moment, and
  // the block goes only to allocations made for later work on that stream (inside a
  // StreamOrderedAllocations scope of that stream, which orders after every use before the
  // free) or, once the stream's worker passed the mark, to any allocation.
  //
  // True, and the block is marked, when `storage`'s memory is a block of this allocator
  // allocated on `stream` (its device's current stream at the allocation) and recorded on no
  // other stream (record_stream): work queued on `stream` may then use it unreferenced.
  static bool use_in_stream_order(const c10::Storage& storage, const c10::Stream& stream,
                                  const rt::StreamClock* clock);
  // While open on a thread, its allocations are for work queued on the stream of `clock`.
  class StreamOrderedAllocations {
   public:
    explicit StreamOrderedAllocations(const rt::StreamClock* clock);
    ~StreamOrderedAllocations();
    StreamOrderedAllocations(const StreamOrderedAllocations&) = delete;
    StreamOrderedAllocations& operator=(const StreamOrderedAllocations&) = delete;

   private:
    const rt::StreamClock* previous_;
  };
};

NeuronCachingAllocator& neuron_allocator();

}  // namespace torchneuron
