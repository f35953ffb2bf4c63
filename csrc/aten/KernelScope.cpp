#include "aten/KernelScope.h"

#include "device/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

#include <c10/core/CPUAllocator.h>

namespace torchneuron {

// Reads and marks OutputBlocks for the allocator below (a friend of OutputBlocks).
class KernelCpuAllocatorAccess {
 public:
  static void* take(OutputBlocks& blocks, std::size_t nbytes) {
    for (auto& b : blocks.blocks_) {
      if (!b.taken && b.nbytes == nbytes) {
        b.taken = true;
        return b.data;
      }
    }
    return nullptr;
  }
  static bool holds(const OutputBlocks& blocks, const void* ptr) {
    for (const auto& b : blocks.blocks_) {
      if (b.taken && b.data == ptr) return true;
    }
    return false;
  }
};

namespace {

// The neuron device whose memory CPU allocations draw from on this thread; -1 outside a kernel.
thread_local c10::DeviceIndex t_kernel_device = -1;
// The current kernel's output blocks, if it runs queued (see OutputBlocks).
thread_local OutputBlocks* t_output_blocks = nullptr;

class KernelCpuAllocator final : public c10::Allocator {
 public:
  explicit KernelCpuAllocator(c10::Allocator* cpu) : cpu_(cpu) {}

  c10::DataPtr allocate(std::size_t nbytes) override {
    if (t_kernel_device < 0) return cpu_->allocate(nbytes);
    if (t_output_blocks != nullptr && nbytes > 0) {
      if (void* block = KernelCpuAllocatorAccess::take(*t_output_blocks, nbytes)) {
        // Not owned: the caller's output tensor owns the block. Context == data, as
        // raw_allocate() expects; free_any leaves the block alone.
        return c10::DataPtr(block, block, &keep_block, c10::Device(c10::kCPU));
      }
    }
    return neuron_allocator().allocate_on(t_kernel_device, nbytes, c10::Device(c10::kCPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_any; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    rt::memcpy(dest, src, count);
  }

  // raw_allocate()d memory comes back here with only its pointer.
  static void free_any(void* ptr) {
    if (t_output_blocks != nullptr && KernelCpuAllocatorAccess::holds(*t_output_blocks, ptr)) {
      return;
    }
    if (neuron_allocator().device_of(ptr) >= 0) {
      NeuronCachingAllocator::free_block(ptr);
    } else {
      original_->raw_deleter()(ptr);
    }
  }

  static void keep_block(void* /*block*/) {}

  static c10::Allocator* original_;

 private:
  c10::Allocator* cpu_;
};

c10::Allocator* KernelCpuAllocator::original_ = nullptr;
KernelCpuAllocator* g_kernel_cpu_allocator = nullptr;

}  // namespace

OutputBlocks::OutputBlocks(c10::SmallVector<Block, 2> blocks)
    : blocks_(std::move(blocks)), previous_(t_output_blocks) {
  t_output_blocks = this;
}

OutputBlocks::~OutputBlocks() { t_output_blocks = previous_; }

KernelScope::KernelScope(c10::DeviceIndex device)
    : previous_(t_kernel_device), current_(device) {
  t_kernel_device = device;
}

KernelScope::~KernelScope() { t_kernel_device = previous_; }

c10::Allocator* kernel_cpu_allocator() { return g_kernel_cpu_allocator; }

void install_kernel_cpu_allocator() {
  if (g_kernel_cpu_allocator != nullptr) return;
  KernelCpuAllocator::original_ = c10::GetAllocator(c10::kCPU);
  g_kernel_cpu_allocator = new KernelCpuAllocator(KernelCpuAllocator::original_);
  // Priority above the default CPU allocator's, so that GetCPUAllocator() returns ours.
  c10::SetAllocator(c10::kCPU, g_kernel_cpu_allocator, /*priority=*/10);
}

void add_output_block(c10::SmallVector<OutputBlocks::Block, 2>& blocks, void* data,
                      std::size_t nbytes) {
  bool clash = nbytes == 0;
  for (auto& b : blocks) {
    if (b.data == data) clash = true;                        // already listed
    if (b.nbytes == nbytes && b.data != data) b.nbytes = 0;  // same size: no target
  }
  if (!clash) blocks.push_back({data, nbytes});
}

}  // namespace torchneuron
