// While a CPU kernel runs on behalf of a neuron op, every CPU allocation it makes (outputs and
// scratch) must come from that neuron device's memory, so that its outputs can be adopted as
// neuron tensors without a copy. The kernel CPU allocator is installed as the CPU allocator
// (at import, torchneuron/__init__.py); outside a kernel scope it forwards to the original CPU
// allocator, so CPU programs are unaffected.
#pragma once

#include "device/CurrentDevice.h"
#include "aten/Launch.h"

#include <c10/core/Allocator.h>
#include <c10/util/SmallVector.h>

#include <cstddef>

namespace torchneuron {

// For the length of one kernel: CPU allocations draw from `device`'s memory, and `device` is the
// current neuron device (allocations the kernel makes on neuron land there too).
class KernelScope {
 public:
  explicit KernelScope(c10::DeviceIndex device);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  c10::DeviceIndex previous_;
  CurrentDeviceScope current_;
  launch::InlineScope inline_;  // neuron ops the kernel dispatches run in place
};

// While a queued op's CPU kernel runs (aten/DeferredOp.h), the memory its results were given at
// the call: the kernel's first CPU allocation of exactly a block's size lands in that block, so
// its result is already where the caller's tensor points and needs no copy. Blocks must have
// distinct sizes (one allocation could not tell two of one size apart). For one kernel call.
class OutputBlocks {
 public:
  struct Block {
    void* data;
    std::size_t nbytes;
    bool taken = false;
  };
  explicit OutputBlocks(c10::SmallVector<Block, 2> blocks);
  ~OutputBlocks();
  OutputBlocks(const OutputBlocks&) = delete;
  OutputBlocks& operator=(const OutputBlocks&) = delete;

 private:
  c10::SmallVector<Block, 2> blocks_;
  OutputBlocks* previous_;
  friend class KernelCpuAllocatorAccess;
};

// Adds a result's memory to `blocks`: once per memory (two results over one storage), and no
// block of a size that two results share (the allocation could not tell them apart).
void add_output_block(c10::SmallVector<OutputBlocks::Block, 2>& blocks, void* data,
                      std::size_t nbytes);

// The allocator CPU-alias storages are created with, so that an out= kernel that resizes an
// alias draws the new buffer from neuron memory.
c10::Allocator* kernel_cpu_allocator();
void install_kernel_cpu_allocator();

}  // namespace torchneuron
