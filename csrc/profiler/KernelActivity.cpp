#include "profiler/KernelActivity.h"
#include "profiler/RecordedActivity.h"

#include "runtime/NeuronRuntime.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <mutex>

namespace torchneuron::profiler {

std::atomic<bool> g_recording{false};

namespace {

std::mutex g_mutex;
std::vector<KernelRecord> g_records;       // the running session's
std::vector<KernelRecord> g_last_session;  // the last finished session's

// torch.profiler pushes the id of each CPU op it records on the thread that runs it; a kernel runs
// on the issuing thread, or on a stream's worker that pushes the id the issuing thread had (see
// runtime/Execution.h), so the innermost id is the op that launched the kernel.
thread_local std::vector<uint64_t> t_correlation;

struct OpenRange {
  KernelRecord record;
};
thread_local std::vector<OpenRange> t_ranges;

int64_t current_stream(c10::DeviceIndex device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  return impl->getStream(c10::Device(c10::DeviceType::PrivateUse1, device)).id();
}

Operand operand_of(const at::Tensor& t) {
  return {t.sizes().vec(), std::string(c10::toString(t.scalar_type()))};
}

void append_operands(std::vector<Operand>& out, const c10::IValue& v) {
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(operand_of(v.toTensor()));
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList().vec()) out.push_back(operand_of(t));
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) append_operands(out, e);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) append_operands(out, e);
  } else if (v.isScalar()) {
    out.push_back({{}, "scalar"});
  }
}

void push_record(KernelRecord&& record) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_recording.load(std::memory_order_relaxed)) g_records.push_back(std::move(record));
}

}  // namespace

void KernelActivityScope::begin(std::string_view name, c10::DeviceIndex device) {
  active_ = true;
  record_.name = std::string(name);
  record_.device = device;
  record_.stream = current_stream(device);
  record_.correlation = t_correlation.empty() ? 0 : t_correlation.back();
  record_.start_ns = rt::clock_ns();
}

void KernelActivityScope::end() {
  record_.end_ns = rt::clock_ns();
  push_record(std::move(record_));
}

void KernelActivityScope::inputs(const c10::IValue* first, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) append_operands(record_.inputs, first[i]);
}

void KernelActivityScope::inputs(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined()) record_.inputs.push_back(operand_of(*t));
  }
}

void KernelActivityScope::outputs(const c10::IValue* first, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) append_operands(record_.outputs, first[i]);
}

void KernelActivityScope::outputs(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined()) record_.outputs.push_back(operand_of(*t));
  }
}

void start_recording() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_records.clear();
  g_recording.store(true);
}

void stop_recording() { g_recording.store(false); }

std::vector<KernelRecord> take_records() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_last_session = g_records;
  return std::move(g_records);
}

const std::vector<KernelRecord>& last_session_records() { return g_last_session; }

void push_correlation(uint64_t id) { t_correlation.push_back(id); }

uint64_t current_correlation() { return t_correlation.empty() ? 0 : t_correlation.back(); }

void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}

int range_push(const std::string& name, int device) {
  KernelRecord r;
  r.name = name;
  r.device = device;
  r.annotation = true;
  r.correlation = t_correlation.empty() ? 0 : t_correlation.back();
  r.start_ns = rt::clock_ns();
  t_ranges.push_back({std::move(r)});
  return static_cast<int>(t_ranges.size()) - 1;
}

int range_pop() {
  if (t_ranges.empty()) return -1;  // as nvtxRangePop with no open range
  KernelRecord r = std::move(t_ranges.back().record);
  t_ranges.pop_back();
  r.end_ns = rt::clock_ns();
  push_record(std::move(r));
  return static_cast<int>(t_ranges.size());
}

void mark(const std::string& name, int device) {
  KernelRecord r;
  r.name = name;
  r.device = device;
  r.annotation = true;
  r.start_ns = r.end_ns = rt::clock_ns();
  push_record(std::move(r));
}

}  // namespace torchneuron::profiler


namespace torchneuron::profiler {

void record_activity(KernelRecord record) {
  record.stream = current_stream(static_cast<c10::DeviceIndex>(record.device));
  record.correlation = t_correlation.empty() ? 0 : t_correlation.back();
  push_record(std::move(record));
}

}  // namespace torchneuron::profiler
