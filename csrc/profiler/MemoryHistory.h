// The allocator's history for torch.neuron.memory._record_memory_history (the shape of CUDA's
// device_traces): every allocation, free, segment and out-of-memory while recording is on, in a
// ring of `max_entries`. The allocator calls memory_event() at each; off, it costs one relaxed
// atomic load. An out-of-memory also calls the hook torch.neuron.memory installs for
// NEURON_OOM_SNAPSHOT, which writes a snapshot and returns where (for the error message).
// With stacks on (the default of _record_memory_history, as CUDA's), each allocation and free
// carries the Python stack that made it, gathered by PyTorch's CapturedTraceback (the same
// frames CUDA's snapshots hold), so memory_viz shows where memory was allocated.
#pragma once

#include <torch/csrc/profiler/combined_traceback.h>

#include <memory>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace torchneuron::profiler {

enum class MemoryAction { kAlloc, kFree, kSegmentAlloc, kSegmentFree, kOom };

struct MemoryEvent {
  MemoryAction action;
  int device;
  std::uintptr_t address;
  std::size_t size;
  std::size_t requested;
  int64_t time_us;
  std::shared_ptr<torch::CapturedTraceback> frames;  // null without stacks
};

extern std::atomic<bool> g_memory_history;

void record_memory_event(MemoryAction action, int device, const void* address, std::size_t size,
                         std::size_t requested,
                         std::shared_ptr<torch::CapturedTraceback> frames);
inline void memory_event(MemoryAction action, int device, const void* address, std::size_t size,
                         std::size_t requested = 0,
                         std::shared_ptr<torch::CapturedTraceback> frames = nullptr) {
  if (g_memory_history.load(std::memory_order_relaxed)) {
    record_memory_event(action, device, address, size, requested, std::move(frames));
  }
}

// The calling thread's Python stack, or null when recording or stacks are off. The allocator
// calls it before taking its lock: gathering may wait for the GIL, and a thread holding the GIL
// may be waiting for the allocator.
// For device workers: allocations on this thread record no Python frames.
void record_no_python_frames_on_this_thread();
std::shared_ptr<torch::CapturedTraceback> gather_memory_frames();

void set_memory_history(bool enabled, std::size_t max_entries, bool stacks = false);
std::vector<MemoryEvent> memory_history();

// Called on an out-of-memory with the device, the size of the request that failed and the
// bytes the allocator may use there (HBM times the per-process fraction), after the allocator
// released its lock (the hook may read its statistics); returns text to append to the error,
// or "".
using OomHook = std::function<std::string(int device, std::size_t size, std::size_t usable)>;
void set_oom_hook(OomHook hook);
std::string on_oom(int device, std::size_t size, std::size_t usable);

}  // namespace torchneuron::profiler
