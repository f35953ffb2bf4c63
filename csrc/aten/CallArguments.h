// An op call's arguments as the queue takes them (DeferredOp.h), read in one walk over the
// caller's stack: the call's signature (everything a result's metadata can depend on, the key of
// its recipe), per neuron tensor a snapshot (its metadata at the call) and, on a signature's first
// call, a meta tensor (one of each per tensor and one meta storage per neuron storage, so that
// identity and aliasing between arguments carry over), and the worker's stack of snapshots.
//
// The boxed fallback (Fallback.cpp) reads the arguments through this walk while it checks them
// when the op is sure to be queued (the device is busy), so that a queued op's arguments are read
// once; otherwise defer_op reads them itself.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron {

// What a result is, in terms of the arguments: recorded once per call signature from the meta
// call's results, and replayed for later calls with the same signature (a training loop calls
// the same ops on the same shapes every step; the meta call, in Python for many ops, is then
// skipped).
struct OutTensor {
  enum Kind : std::uint8_t { kUndefined, kArgument, kView, kFresh } kind = kUndefined;
  int index = 0;  // the argument tensor (kArgument), argument storage (kView) or fresh storage
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 5> sizes, strides;
  int64_t offset = 0;
  bool conj = false, neg = false;
};
struct ReturnSlot {
  enum Kind : std::uint8_t { kTensor, kList, kNone } kind;
  int count;  // tensors it takes from `outs`
};
struct Recipe {
  std::vector<ReturnSlot> returns;
  std::vector<OutTensor> outs;
  std::vector<std::size_t> fresh_nbytes;
  bool queue = true;  // false: the CPU kernel disagreed with the meta function; run it now
  // Not empty: the call only sizes empty out= arguments (argument tensor, contiguous sizes), as
  // a composite op passing `at::empty({0})` to its out= form does (abs): they are resized at the
  // call and the call is then queued as an ordinary out= call.
  std::vector<std::pair<std::size_t, std::vector<int64_t>>> resize;
};

struct Result {
  at::Tensor neuron;  // what the caller got
  bool fresh;         // memory of its own, to be written by the kernel
};

class CallArguments {
 public:
  // Starts the signature with the op and the default dtype (factories read it).
  explicit CallArguments(const c10::OperatorHandle& op);

  // Reads the call's next argument: calls on_tensor(t) for each tensor in it (before anything
  // else is done with that tensor), appends the argument to the signature and its snapshot to
  // the worker's stack. False when the queue cannot take it (a CPU tensor that is not a scalar,
  // a sparse tensor, a symbolic value); the walk then stops, and on_tensor may not have seen
  // every tensor of `v`.
  bool read(const c10::IValue& v, c10::function_ref<void(const at::Tensor&)> on_tensor);

  // The signature read so far.
  std::string& key() { return key_; }
  // The worker's stack: snapshots of the neuron arguments and copies of CPU scalars, the other
  // values as they are.
  torch::jit::Stack& work_stack() { return work_stack_; }

  // A meta tensor standing for argument tensor `t` (for the meta call of a first call).
  at::Tensor meta_of(const at::Tensor& t);
  // After the meta call: every argument kept its metadata (no resize, restride or set_).
  bool unchanged() const;
  // The empty out= arguments the meta call sized (see Recipe::resize), when that was the only
  // change it made to an argument; empty otherwise.
  std::vector<std::pair<std::size_t, std::vector<int64_t>>> sized_outs() const;
  // The recipe for the meta call's results; null when a result is not a strided meta tensor
  // or the results are not tensors, lists of tensors or None.
  std::shared_ptr<Recipe> recipe_of(const torch::jit::Stack& returned) const;
  // The neuron argument tensors (recipe indices of kArgument) and storages (of kView).
  std::vector<at::Tensor> argument_tensors() const;
  std::vector<c10::Storage> argument_storages() const;
  // The caller's results: arguments, views of their storages, or tensors over fresh memory.
  std::vector<c10::IValue> results_of(const Recipe& recipe, c10::DeviceIndex device,
                                      std::vector<Result>& results) const;

 private:
  struct TensorEntry {
    at::Tensor neuron;
    at::Tensor snapshot;
    std::size_t storage;
    at::Tensor meta;  // made on a signature's first call only
  };
  struct StorageEntry {
    c10::Storage neuron;
    c10::Storage meta;
  };

  bool visit(const c10::IValue& v, c10::IValue& snapshot,
             c10::function_ref<void(const at::Tensor&)> on_tensor);
  // The tensor's snapshot; undefined with ok_ false when the queue cannot take it.
  at::Tensor visit_tensor(const at::Tensor& t);
  std::size_t find_tensor(const at::Tensor& t) const;

  bool ok_ = true;
  // False: floats are written by their type only (a pointwise op's results have its inputs'
  // shape whatever its floats' values, see defer_op).
  bool float_values_;
  std::string key_;
  torch::jit::Stack work_stack_;
  c10::SmallVector<TensorEntry, 4> tensors_;
  c10::SmallVector<StorageEntry, 4> storages_;
  // CPU scalar tensors (0-dim, not wrapped numbers) and their copies, taken at the call.
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> cpu_;
};

}  // namespace torchneuron
