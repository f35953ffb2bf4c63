// Fused eager (NEURON_EAGER_MODE=fused): the queue holds back consecutive pointwise ops (and a
// reduction that ends them) issued on a stream, in independent chains (an op joins the chains
// whose writes it reads or whose memory it writes), and when something must come after them (a
// non-fusible op, a synchronization, a marker, a query) hands them over: once a chain signature
// is hot and its kernel compiled (torchneuron/fusion, Inductor's C++ code generation, on a
// Python thread), as one queued item that runs the generated kernel, writing only the results
// someone can still read; before that, op by op, as async mode queues them.
//
// The hand-over never takes Python's GIL: a compiled chain is replayed from its recorded kernel
// calls (csrc/compile/KernelLaunch.h), and a hot chain is described to the compile thread
// through a request queue it waits on.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron {
struct RecordedProgram;
}

namespace torchneuron::fusion {

// From the configuration (torchneuron/runtime/config.py; whether fused mode is on is the eager
// mode, aten/Launch.h): how many times a chain is seen before it is compiled, the reductions that may end a chain, as
// "aten::sum.default" (the list lives in torchneuron/fusion/ops.py), and the Scalar-typed
// arguments a fused kernel reads at each call, as ("aten::add.Tensor", "alpha")
// (torchneuron/fusion/runtime_scalars.py).
void configure(int hot, const std::vector<std::string>& reductions,
               const std::vector<std::pair<std::string, std::string>>& runtime_scalars);
// Ops are held now: the effective eager mode is fused (aten/Launch.h).
bool holding();

// Offers an op the launch decision asked to hold (aten/Launch.h), which defer_op would otherwise
// queue (through aten/DeferredOp.h's OpHolder), on `device`'s current stream: `args` are the caller's
// arguments (the op's schema arguments, in order), `snapshots` the queued work's copies of them,
// `result` what the caller gets back. True when the op was held: `work` (the op's unfused run)
// was taken and runs later, on its own or replaced by a fused kernel, and `keep` (references
// to the memory `work` may use unreferenced) was taken and is kept until the op is handed over.
// False when the caller queues it as usual (launch::enqueue hands over the held chain first).
bool hold(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::IValue* args,
          const torch::jit::Stack& snapshots, const at::Tensor& result,
          std::function<void()>& work, std::shared_ptr<void>& keep);

// A hot chain, described for the compile thread (torchneuron/fusion/queue_feeder.py).
struct RequestArg {
  enum Kind : std::uint8_t { kConstant, kInput, kStep } kind = kConstant;
  int index = 0;          // the input or step (kInput, kStep)
  c10::IValue constant;   // kConstant
};
struct RequestStep {
  c10::OperatorHandle op;  // the functional op (an in-place op's result is written by outputs)
  std::vector<RequestArg> args;
};
struct TensorLayout {
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
};
struct RequestInput {
  bool scalar = false;
  bool runtime = false;  // a scalar float the kernel reads at each call (a 0-d float64 tensor)
  c10::IValue value;     // a Python number the op received (scalar)
  TensorLayout layout;   // a tensor (not scalar)
};
struct RequestOutput {
  int step;
  int into_input;  // -1: a buffer of its own, laid out as `buffer`
  TensorLayout buffer;
};
struct Request {
  std::uint64_t id;
  int threads;
  std::vector<RequestInput> inputs;
  std::vector<RequestStep> steps;
  std::vector<RequestOutput> outputs;
};

// Waits for the next hot chain (releases nothing: call it without the GIL); nullopt never comes
// back except when `timeout_ms` >= 0 passed first.
std::optional<Request> next_request(int timeout_ms);
// The compile thread's answer: the chain's kernel calls (over [tensor inputs..., buffers...]),
// or why it cannot fuse (the chain then runs unfused for good).
void install(std::uint64_t id, RecordedProgram program);
void fail(std::uint64_t id, const std::string& why);

struct Stats {
  std::int64_t ops_held = 0;        // ops the queue held back
  std::int64_t chains = 0;          // chains of two or more ops handed over
  std::int64_t chains_fused = 0;    // ... that ran as one generated kernel
  std::int64_t ops_fused = 0;       // ops those covered
  std::int64_t results_skipped = 0; // intermediate results the fused kernels never wrote
  std::int64_t signatures = 0;      // distinct chain signatures seen
  std::int64_t chains_varying = 0;  // chains left unfused: their floats change between calls
  std::int64_t requested = 0;       // signatures that became hot
  std::int64_t ready = 0;           // ... compiled and recorded
  std::int64_t failed = 0;          // ... that cannot fuse
  std::int64_t held_now = 0;        // ops in the chains held now (at most kMaxHeldSteps, 512)
  std::vector<std::string> failures;  // why, per failed signature (the first 16)
};
Stats stats();
// Forgets every signature and count (tests start from cold).
void reset();

}  // namespace torchneuron::fusion
