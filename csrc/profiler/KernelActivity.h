// Device activities for torch.profiler: every kernel the neuron device runs opens one
// KernelActivityScope where it runs (the boxed fallback, native kernels, compiled graphs,
// collectives). With the profiler off the scope costs one relaxed atomic load; with it on, the
// scope records the kernel's name, its start and end on the device clock, its device and stream,
// the CPU op that launched it (the correlation id torch.profiler pushed on this thread) and the
// shapes and dtypes of its operands, which the Trainium time estimate reads
// (torchneuron/profiler/roofline.py). NeuronActivityProfiler.cpp hands the records to Kineto.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace torchneuron::profiler {

// One operand: its shape and dtype name ("float32"), or a shape-less scalar.
struct Operand {
  std::vector<int64_t> shape;
  std::string dtype;
};

struct KernelRecord {
  std::string name;
  int device = 0;
  int64_t stream = 0;
  int64_t start_ns = 0;  // device clock (rt::clock_ns)
  int64_t end_ns = 0;
  uint64_t correlation = 0;  // the launching CPU op's id in torch.profiler, 0 if none
  std::vector<Operand> inputs;
  std::vector<Operand> outputs;
  bool annotation = false;  // a user range or mark (torch.neuron.nvtx), not a kernel
  bool memcpy = false;  // a copy between host and device or between devices, not a kernel
};

// True while a profiler session records device activities.
extern std::atomic<bool> g_recording;
inline bool recording() { return g_recording.load(std::memory_order_relaxed); }

class KernelActivityScope {
 public:
  // `name` must outlive the scope (an operator's schema name, a string literal).
  KernelActivityScope(std::string_view name, c10::DeviceIndex device) {
    if (recording()) begin(name, device);
  }
  ~KernelActivityScope() {
    if (active_) end();
  }
  KernelActivityScope(const KernelActivityScope&) = delete;
  KernelActivityScope& operator=(const KernelActivityScope&) = delete;

  bool active() const { return active_; }
  // The activity is a copy (Kineto's GPU_MEMCPY, "Memcpy HtoD" rows in CUDA's traces).
  void mark_memcpy() { record_.memcpy = true; }
  // Operands, read only while recording (call them under `if (scope.active())`).
  void inputs(const c10::IValue* first, std::size_t count);
  void inputs(std::initializer_list<const at::Tensor*> tensors);
  void outputs(const c10::IValue* first, std::size_t count);
  void outputs(std::initializer_list<const at::Tensor*> tensors);

 private:
  void begin(std::string_view name, c10::DeviceIndex device);
  void end();

  bool active_ = false;
  KernelRecord record_;
};

// A native kernel's fast path as one device activity: `run` returns the kernel's result.
template <typename Run>
decltype(auto) run_recorded(std::string_view name, std::initializer_list<const at::Tensor*> inputs,
                            Run&& run) {
  KernelActivityScope scope(name, (*inputs.begin())->device().index());
  if (!scope.active()) return run();
  scope.inputs(inputs);
  decltype(auto) result = run();
  scope.outputs({&result});
  return result;
}

// Session control, for the Kineto session and the bindings.
void start_recording();
void stop_recording();
std::vector<KernelRecord> take_records();            // the finished session's records, once
const std::vector<KernelRecord>& last_session_records();  // kept for torchneuron.profiler
void push_correlation(uint64_t id);
void pop_correlation();
uint64_t current_correlation();  // the innermost pushed id on this thread, 0 if none

// User ranges (torch.neuron.nvtx): instant marks and push/pop ranges, recorded as device
// annotations on the current device's timeline.
int range_push(const std::string& name, int device);  // returns the new range's depth
int range_pop();
void mark(const std::string& name, int device);

}  // namespace torchneuron::profiler
