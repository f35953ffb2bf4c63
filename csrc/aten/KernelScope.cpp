#include "aten/KernelScope.h"

#include "device/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

#include <c10/core/CPUAllocator.h>

namespace torchneuron {
namespace {

// The neuron device whose memory CPU allocations draw from on this thread; -1 outside a kernel.
thread_local c10::DeviceIndex t_kernel_device = -1;

class KernelCpuAllocator final : public c10::Allocator {
 public:
  explicit KernelCpuAllocator(c10::Allocator* cpu) : cpu_(cpu) {}

  c10::DataPtr allocate(std::size_t nbytes) override {
    if (t_kernel_device < 0) return cpu_->allocate(nbytes);
    return neuron_allocator().allocate_on(t_kernel_device, nbytes, c10::Device(c10::kCPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_any; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    rt::memcpy(dest, src, count);
  }

  // raw_allocate()d memory comes back here with only its pointer.
  static void free_any(void* ptr) {
    if (neuron_allocator().device_of(ptr) >= 0) {
      NeuronCachingAllocator::free_block(ptr);
    } else {
      original_->raw_deleter()(ptr);
    }
  }

  static c10::Allocator* original_;

 private:
  c10::Allocator* cpu_;
};

c10::Allocator* KernelCpuAllocator::original_ = nullptr;
KernelCpuAllocator* g_kernel_cpu_allocator = nullptr;

}  // namespace

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

}  // namespace torchneuron
