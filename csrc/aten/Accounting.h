// Readiness accounting: what a program would cost on Trainium, counted where the launch decision
// is made (aten/Launch.h) while the program runs on the software NeuronCore. Off by default: then
// the only cost is one relaxed atomic load per op (enabled()). On (torch.neuron.expect, the
// readiness command, NEURON_ACCOUNTING=1), every device op call is counted on the calling thread,
// before it runs, queues or is held, so the counts are the same in every eager mode:
// - its signature (the op and its tensors' dtypes, layouts and sizes): a new one is what a
//   per-shape-compiling runtime compiles, and a new signature of an op already seen counts as a
//   recompile of that op;
// - host fallbacks: calls a Trainium runtime runs on the host (float64/complex128 arithmetic,
//   sparse layouts, ops the op-support table classifies so), with the bytes that would cross the
//   host link each way and the CPU time; such a call runs inline, after the queued work, timed;
// - host synchronizations, by cause.
// Each finding carries the user's Python line (profiler/PythonLine.h). The Python side
// (torchneuron/device/accounting.py) adds Dynamo's recompiles and peak memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace torchneuron::accounting {

extern std::atomic<bool> g_enabled;
inline bool enabled() { return g_enabled.load(std::memory_order_relaxed); }
void set_enabled(bool on);

// An op call reaching the boxed fallback (while the accounting is on, the native fast paths
// step aside so that every call arrives here, under its own name): its `num_args` arguments
// start at `args`.
void op_call(const c10::OperatorHandle& op, const c10::IValue* args, std::size_t num_args);

// Why a Trainium runtime would run this call on the host, or null when it would not: "float64"
// (float64/complex128 arithmetic: `float64` as the fallback's walk found it), "sparse" (a
// sparse layout), or the op-support table's reason for the op.
const char* host_fallback_reason(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                 bool float64);
// One host-fallback call that ran: bytes to the host (its neuron operands), back (its neuron
// results), and the kernel's CPU time.
void host_fallback(const c10::OperatorHandle& op, const char* reason, std::int64_t bytes_to_host,
                   std::int64_t bytes_from_host, std::int64_t cpu_ns);
// Ops the op-support table classifies as host fallbacks whatever their dtype, by full name
// ("aten::nonzero" matches every overload, "aten::nonzero.out" one), each with its reason.
void set_host_fallback_ops(std::vector<std::pair<std::string, std::string>> ops);

// Whether the call's result size comes from its data (torch's dynamic_output_shape tag: nonzero,
// unique, masked_select). Advanced indexing carries the tag for its boolean-mask form only: x[idx]
// with integer indices has the indices' shape, so it counts only with a bool or uint8 index.
bool data_dependent_shape(const c10::OperatorHandle& op, const c10::IValue* args,
                          std::size_t num_args);

// What makes the host wait for the device.
enum class SyncCause : std::uint8_t {
  kItem,                // .item(), bool(t), int(t): _local_scalar_dense
  kCopyToHost,          // .cpu(), .numpy(), .tolist(), printing: a copy to pageable host memory
  kDataDependentShape,  // nonzero, unique, masked_select: the result's size comes from data
  kSynchronize,         // torch.neuron.synchronize(), Stream.synchronize()
  kEventSynchronize,    // Event.synchronize()
};
const char* sync_cause_name(SyncCause cause);
// `bytes`: what the sync brings to the host (a copy's size, an item's), 0 when nothing.
void sync(SyncCause cause, const std::string& op, std::int64_t bytes);

// One aggregated finding: kind ("signature", "recompile", "host_fallback", "sync"), the op, the
// user's line, and a detail (the first signature seen there, the fallback's reason, the sync's
// cause).
struct Record {
  std::string kind;
  std::string op;
  std::string location;
  std::string detail;
  std::int64_t count = 0;
  std::int64_t bytes_to_host = 0;
  std::int64_t bytes_from_host = 0;
  std::int64_t cpu_ns = 0;
};
std::vector<Record> records();
// Forgets every record and every signature seen, as a new process would start.
void reset();

}  // namespace torchneuron::accounting
