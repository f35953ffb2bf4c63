// Fused eager (NEURON_EAGER_MODE=fused), the launch decision's third answer, "hold"
// (aten/Launch.h): the queue holds back consecutive pointwise ops (and a reduction that ends
// them) issued on a stream, in independent chains (an op joins the chains whose writes it reads
// or whose memory it writes), and when something must come after them (a non-fusible op, a
// synchronization, a marker, a query) hands them over: once a chain signature is hot and its
// kernel compiled (torchneuron/fused_eager, Inductor's C++ code generation, on a Python thread),
// as one queued item that runs the generated kernel, writing only the results someone can still
// read; before that, op by op, as async mode queues them.
//
// The hand-over never takes Python's GIL: a compiled chain is replayed from its recorded kernel
// calls (csrc/compile/KernelLaunch.h), and a hot chain is described to the compile thread
// through a request queue it waits on.
//
// The parts: which ops may fuse (FusibleOps.h), the chain (HeldChain.h), what a chain is handed
// over as (ChainSignature.h), and here, the open chains and their hand-over.
#pragma once

#include <Python.h>  // first: Python.h must precede standard headers

#include "fused_eager/ChainRequest.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torchneuron::fused_eager {

// From the configuration (torchneuron/runtime/config.py; whether fused mode is on is the eager
// mode, aten/Launch.h): how many times a chain is seen before it is compiled. Installs the hold
// in the launch decision. The rule's lists are configure_rule's (FusibleOps.h).
void configure(int hot);
// Ops are held now: the effective eager mode is fused (aten/Launch.h).
bool holding();

// Offers an op the launch decision asked to hold (aten/Launch.h), which defer_op would
// otherwise queue (through aten/DeferredOp.h's OpHolder), on `device`'s current stream: `args`
// are the caller's arguments (the op's schema arguments, in order), `snapshots` the queued work's copies of them,
// `result` what the caller gets back. True when the op was held: `work` (the op's unfused run)
// was taken and runs later, on its own or replaced by a fused kernel, and `keep` (references
// to the memory `work` may use unreferenced) was taken and is kept until the op is handed over.
// False when the caller queues it as usual (launch::enqueue hands over the held chain first).
bool hold(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::IValue* args,
          const torch::jit::Stack& snapshots, const at::Tensor& result,
          std::function<void()>& work, std::shared_ptr<void>& keep);

// Waits for the next hot chain (releases nothing: call it without the GIL); nullopt never comes
// back except when `timeout_ms` >= 0 passed first.
std::optional<Request> next_request(int timeout_ms);
// The compile thread's answer: records a compiled chain's kernel calls (`call(tensors)` run with
// the launches recorded, compile/KernelLaunch.h, over [tensor inputs..., buffers...]) and
// installs them for request `id`; returns "" when installed, or why the chain cannot fuse (it
// then runs unfused for good). Called holding the GIL.
std::string install_recorded(std::uint64_t id, PyObject* call, PyObject* tensors);
// Or why it cannot fuse, without a kernel.
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

}  // namespace torchneuron::fused_eager
