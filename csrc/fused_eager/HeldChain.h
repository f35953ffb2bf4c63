// Fused eager's one model of a chain: the ops a stream's queue holds back, as steps over the
// chain's inputs (tensors the caller passed, Python numbers) and earlier steps, with the tensors
// it reads and writes by identity. How an op joins a chain (append) and how two independent
// chains become one (absorb) live here; when chains are opened and handed over is FusedEager.cpp.
#pragma once

#include "fused_eager/ChainRequest.h"
#include "fused_eager/FusibleOps.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/core/Stream.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

namespace torchneuron::fused_eager {

struct ArgRef {
  RequestArg::Kind kind = RequestArg::kConstant;
  int index = 0;      // input or step
  int identity = -1;  // tensors: the tensor identity it reads
  c10::IValue constant;
};

struct HeldStep {
  OpKind kind;
  std::vector<ArgRef> args;
  int identity;  // the tensor identity this step's result is
  const char* name;
  std::function<void()> work;  // the op's unfused run
  // References to the memory `work` uses unreferenced (stream order, see aten/DeferredOp.cpp),
  // kept while the op is held: live() (ChainSignature.h) counts them as the chain's own holders.
  std::shared_ptr<void> keep;
};

struct ChainInput {
  bool scalar = false;
  c10::IValue value;    // scalar: the Python number
  at::Tensor snapshot;  // tensor: its metadata at the call and its memory
  bool runtime = false;  // scalar: a float the kernel reads at each call (not in the signature)
};

// A tensor the chain reads or writes, by the caller's TensorImpl: an external input (input >= 0)
// or a step's fresh result; `last_step` is the step whose value it holds now (-1: unwritten).
struct Identity {
  at::Tensor caller;
  const c10::StorageImpl* storage;
  int input = -1;
  int first_step = -1;
  int last_step = -1;
};

struct HeldChain {
  c10::Stream stream;
  std::vector<HeldStep> steps;
  std::vector<ChainInput> inputs;
  std::vector<Identity> identities;
  std::uint64_t touched = 0;  // when an op last joined it (FusedEager.cpp's clock)
  std::size_t result_bytes = 0;  // of its steps' results (in-place ones too: an upper bound)
  explicit HeldChain(c10::Stream s) : stream(s) {}
};

// Whether the chain writes the identity's memory (a fresh result, or an input written in place)
// rather than only reading it.
inline bool writes(const Identity& e) { return e.input < 0 || e.last_step >= 0; }

inline bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Which open chains hold each storage: the one that writes it, or those that only read it.
struct MemoryIndex {
  std::unordered_map<const c10::StorageImpl*, HeldChain*> writer;
  std::unordered_map<const c10::StorageImpl*, c10::SmallVector<HeldChain*, 2>> readers;

  void add(const Identity& e, HeldChain* chain);
  void remove(const Identity& e, const HeldChain* chain);
};

// Appends the op (`kind`, named `name`, called with `args`; `snapshots` are the queued work's
// copies of them, `result` what the caller got) to the chain, taking `work` and `keep`; false
// (the chain unchanged) when it cannot join it: an argument the chain cannot describe, a new
// input sharing memory with a tensor the chain holds, an in-place op whose arguments would be
// promoted.
bool append(HeldChain& chain, const OpKind& kind, const char* name, const c10::IValue* args,
            const torch::jit::Stack& snapshots, const at::Tensor& result,
            std::function<void()>& work, std::shared_ptr<void>& keep);

// Two chains may merge when the memory they share is the same tensor that neither writes (calls
// of a function on one input): a chain never holds two tensors over one storage, as append()
// ensures within a chain (the fused kernel reads and writes each element once, in one order).
bool mergeable(const HeldChain& into, const HeldChain& from);

// Appends `from`'s steps after `into`'s (the chains are independent: any order computes the
// same; mergeable()), moving `index`'s entries of `from` to `into`; `from` is left empty, for
// the caller to close. A tensor both read is one input of the merged chain.
void absorb(HeldChain& into, HeldChain& from, MemoryIndex& index);

}  // namespace torchneuron::fused_eager
