// Asynchronous execution of the boxed fallback's ops (aten/Launch.h decides, runtime/Execution.h runs).
//
// At the call, the op runs on meta tensors (PyTorch's meta functions: the CPU's own shape and
// dtype checks, with its error types), which gives its results' metadata; results that are
// arguments or views of arguments are those tensors, the others get neuron memory now. The CPU
// kernel then runs on the stream's worker, on CPU aliases of snapshots of the arguments (their
// metadata at the call), and writes its results into that memory (KernelScope's OutputBlocks:
// no copy when the kernel allocates them in one go, as structured kernels do).
//
// A random op reserves its draws at the call (the generator's offset moves on then, in call
// order), so queued and synchronous runs draw the same numbers.
//
// An op is run now instead (returns false) when its results cannot be known before it runs
// (nonzero, unique, item: no meta function), when it reads CPU tensors other than scalars, or
// when it resizes or re-points an argument.
//
// An op outside the aten namespace (oneDNN's `mkldnn::_linear_pointwise` in Inductor's code, an
// extension's, a torch.library op) is queued only while its thread captures a device graph
// (aten/GraphCapture.h), and only in a signature that ran before outside the capture: there it
// runs at the call, and its first call of each signature learns its results' metadata, checked
// against its CPU kernel (RecipeCheck), where a capture would take an ATen op's meta function
// on trust. Its schema is taken at its word (writes annotated, results tensors).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>

#include <memory>
#include <string>
#include <vector>

namespace torchneuron {

class CallArguments;  // aten/CallArguments.h

// The first call of a signature (op and arguments' metadata) runs now, and the CPU kernel's
// results are compared with what the meta function said (dtypes, sizes, strides, and which are
// arguments, views of arguments or fresh): only a signature whose meta answer held is queued
// later; one where they disagree always runs now. PyTorch's meta functions are meant to match
// the kernels, and a few do not.
class RecipeCheck {
 public:
  RecipeCheck();
  ~RecipeCheck();
  RecipeCheck(const RecipeCheck&) = delete;
  RecipeCheck& operator=(const RecipeCheck&) = delete;
  // After the op ran now: its `num_returns` results on top of `stack`, as the caller gets them.
  void confirm(const torch::jit::Stack& stack, std::size_t num_returns);

 private:
  friend bool defer_op(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*,
                       c10::DeviceIndex, bool, RecipeCheck*, CallArguments*);
  std::string key_;
  std::shared_ptr<void> recipe_;  // a Recipe (DeferredOp.cpp)
  std::vector<at::Tensor> tensors_;
  std::vector<c10::Storage> storages_;
};

// Whether `op` may be queued at all: an op with tensor results on a dense neuron key, whose
// meta function has not been found wanting (read before reading the arguments for the queue).
bool may_defer(const c10::OperatorHandle& op, c10::DispatchKeySet ks);
// Whether `op` is queued only in a capture (not an aten op, see above): outside one, defer_op
// is still asked at every call, whatever the launch decision, to learn its signatures' recipes.
bool queued_only_in_capture(const c10::OperatorHandle& op);

// Queues `op` (arguments checked by the fallback) on the current stream of `device`, or offers it
// to the fused component when the launch decision says to hold it (`hold`), and leaves its
// results on the stack; false, with the stack untouched, when it must run now (then, on a
// signature's first call, `check` holds what to confirm once it ran). `read`: the arguments as
// the fallback's check already read them for the queue (every one, and may_defer held), or null
// to read them here.
bool defer_op(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
              c10::DeviceIndex device, bool hold, RecipeCheck* check, CallArguments* read);

// Why this thread's last call that defer_op could not queue must run at the call; kept only while
// the thread captures a graph (aten/GraphCapture.h), whose refusal names it.
std::string capture_refusal();

// Fused eager (csrc/fused_eager/FusedEager.h, a layer above) may hold an op back instead of
// queuing it: `hold(op, device, args, snapshots, result, work)` is offered each op with one tensor
// result that the launch decision asked to hold (args: the caller's arguments; snapshots:
// the queued work's copies; work: the op's unfused run, which may use memory of its stream
// unreferenced; keep: references to the memory the snapshots and the result use, for as long
// as the op is held) and takes `work` and `keep` when it held the op.
struct OpHolder {
  bool (*hold)(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::IValue* args,
               const torch::jit::Stack& snapshots, const at::Tensor& result,
               std::function<void()>& work, std::shared_ptr<void>& keep);
};
void set_op_holder(const OpHolder* holder);

}  // namespace torchneuron
