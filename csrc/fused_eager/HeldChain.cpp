#include "fused_eager/HeldChain.h"

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <utility>

namespace torchneuron::fused_eager {
namespace {

// A Python number's value (a wrapped-number CPU tensor), as the Python type it came as.
c10::IValue number_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::kBool: return c10::IValue(t.const_data_ptr<bool>()[0]);
    case c10::kLong: return c10::IValue(t.const_data_ptr<int64_t>()[0]);
    case c10::kDouble: return c10::IValue(t.const_data_ptr<double>()[0]);
    case c10::kComplexDouble:
      return c10::IValue(c10::complex<double>(t.const_data_ptr<c10::complex<double>>()[0]));
    default: return c10::IValue();
  }
}

// A Python number may join an in-place op without changing what the functional op computes:
// not a float into an integer tensor, not a complex into a real one.
bool number_fits(const c10::IValue& number, c10::ScalarType self) {
  if (number.isComplexDouble()) return c10::isComplexType(self);
  if (number.isDouble()) return c10::isFloatingType(self) || c10::isComplexType(self);
  return true;
}

// A constant argument a chain can describe: a plain value, or a list of plain numbers (not
// symbolic values, generators, devices or tensor lists).
bool describable_constant(const c10::IValue& v) {
  if (v.isTensorList() || v.isGenerator() || v.isObject() || v.isDevice()) return false;
  if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (!(e.isInt() || e.isDouble() || e.isBool())) return false;
    }
    return true;
  }
  return v.isNone() || v.isInt() || v.isDouble() || v.isBool() || v.isString() ||
         v.isComplexDouble();
}

// A float reaches the kernel at run time (as a 0-d float64 tensor) only where that computes
// what the Python number does: some operand with dimensions is float32 or float64, so the
// number is rounded to the result's type either way and a 0-d float64 tensor promotes nothing
// (over a float16 tensor or an integer one it would). One kernel then serves every value.
bool has_float_operands(const c10::IValue* args, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (!args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (is_neuron(t) && t.dim() > 0 &&
        (t.scalar_type() == c10::kFloat || t.scalar_type() == c10::kDouble)) {
      return true;
    }
  }
  return false;
}

// One op joining a chain: the inputs and identities it brings are collected apart and committed
// only when every argument could be described, so a refusal leaves the chain unchanged.
class Joining {
 public:
  Joining(HeldChain& chain, const OpKind& kind, const c10::IValue* args,
          const torch::jit::Stack& snapshots)
      : chain_(chain), kind_(kind), args_(args), snapshots_(snapshots),
        num_args_(kind.functional->schema().arguments().size()),
        self_dtype_(kind.in_place && args[0].isTensor() ? args[0].toTensor().scalar_type()
                                                        : c10::ScalarType::Undefined),
        float_operands_(has_float_operands(args, num_args_)),
        refs_(num_args_) {}

  // Describes every argument of the functional op; false when one cannot be.
  bool describe_arguments() {
    for (std::size_t i = 0; i < num_args_; ++i) {
      if (!describe(i)) return false;
    }
    return true;
  }

  // The identity the step defines: the in-place op's self, the out= tensor, or a fresh result;
  // -1 when it cannot (a view of an input is no fresh result).
  int defined_identity(const at::Tensor& result) {
    if (kind_.in_place) return refs_[0].identity;
    if (kind_.out) {
      // The out tensor: a tensor the chain holds, or a new input the step is written into (it
      // may not share memory with anything the chain holds).
      const c10::IValue& v = args_[num_args_];
      if (!v.isTensor() || !is_neuron(v.toTensor()) || v.toTensor().layout() != c10::kStrided ||
          v.toTensor().is_conj() || v.toTensor().is_neg()) {
        return -1;
      }
      const at::Tensor& out = v.toTensor();
      const int known = find_identity(out.unsafeGetTensorImpl());
      return known >= 0 ? known : add_input(out, snapshots_[num_args_].toTensor());
    }
    if (!is_neuron(result) || result.layout() != c10::kStrided) return -1;
    const c10::StorageImpl* storage = result.storage().unsafeGetStorageImpl();
    if (held_memory(storage)) return -1;  // a view of its input, not a fresh result
    const int step = static_cast<int>(chain_.steps.size());
    new_identities_.push_back(Identity{result, storage, -1, step, -1});
    return static_cast<int>(chain_.identities.size() + new_identities_.size() - 1);
  }

  void commit(int defines, const char* name, std::function<void()>& work,
              std::shared_ptr<void>& keep) {
    const int step = static_cast<int>(chain_.steps.size());
    for (auto& i : new_inputs_) chain_.inputs.push_back(std::move(i));
    for (auto& i : new_identities_) chain_.identities.push_back(std::move(i));
    chain_.identities[defines].last_step = step;
    chain_.steps.push_back(
        HeldStep{kind_, std::move(refs_), defines, name, std::move(work), std::move(keep)});
  }

 private:
  bool describe(std::size_t i) {
    const c10::IValue& v = args_[i];
    ArgRef& ref = refs_[i];
    if (!v.isTensor()) {
      if (!describable_constant(v)) return false;
      if (v.isDouble() && float_operands_ && kind_.runtime_scalar[i]) {
        add_number(ref, v, true);
      } else {
        ref.constant = v;
      }
      return true;
    }
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      ref.constant = c10::IValue();
      return true;
    }
    if (!is_neuron(t)) {
      // A Python number: an input of the chain whose value is compiled in.
      if (!t.unsafeGetTensorImpl()->is_wrapped_number()) return false;
      c10::IValue number = number_of(t);
      if (number.isNone()) return false;
      if (kind_.in_place && !number_fits(number, self_dtype_)) return false;
      const bool runtime = number.isDouble() && float_operands_;
      add_number(ref, std::move(number), runtime);
      return true;
    }
    if (t.layout() != c10::kStrided || !t.has_storage() || t.is_conj() || t.is_neg() ||
        (kind_.in_place && t.scalar_type() != self_dtype_)) {
      return false;
    }
    int id = find_identity(t.unsafeGetTensorImpl());
    if (id < 0) id = add_input(t, snapshots_[i].toTensor());
    if (id < 0) return false;
    const Identity& e = identity(id);
    ref.identity = id;
    if (e.last_step >= 0) {
      ref.kind = RequestArg::kStep;
      ref.index = e.last_step;
    } else {
      ref.kind = RequestArg::kInput;
      ref.index = e.input;
    }
    return true;
  }

  const Identity& identity(int id) const {
    const auto known = static_cast<int>(chain_.identities.size());
    return id < known ? chain_.identities[id] : new_identities_[id - known];
  }

  void add_number(ArgRef& ref, c10::IValue number, bool runtime) {
    ref.kind = RequestArg::kInput;
    ref.index = static_cast<int>(chain_.inputs.size() + new_inputs_.size());
    new_inputs_.push_back(ChainInput{true, std::move(number), at::Tensor(), runtime});
  }

  int find_identity(const c10::TensorImpl* impl) const {
    for (std::size_t k = 0; k < chain_.identities.size(); ++k) {
      if (chain_.identities[k].caller.unsafeGetTensorImpl() == impl) return static_cast<int>(k);
    }
    for (std::size_t k = 0; k < new_identities_.size(); ++k) {
      if (new_identities_[k].caller.unsafeGetTensorImpl() == impl) {
        return static_cast<int>(chain_.identities.size() + k);
      }
    }
    return -1;
  }

  // Whether `storage` is the memory of a tensor the chain (or this op, so far) holds.
  bool held_memory(const c10::StorageImpl* storage) const {
    auto same = [&](const Identity& e) { return e.storage == storage; };
    return std::any_of(chain_.identities.begin(), chain_.identities.end(), same) ||
           std::any_of(new_identities_.begin(), new_identities_.end(), same);
  }

  // A new external input (its snapshot at the call), as a tensor identity of the chain; -1 when
  // its memory is another held tensor's (the fused kernel reads and writes each element once,
  // in one order).
  int add_input(const at::Tensor& t, const at::Tensor& snapshot) {
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    if (held_memory(storage)) return -1;
    const int input = static_cast<int>(chain_.inputs.size() + new_inputs_.size());
    new_inputs_.push_back(ChainInput{false, c10::IValue(), snapshot, false});
    new_identities_.push_back(Identity{t, storage, input, -1, -1});
    return static_cast<int>(chain_.identities.size() + new_identities_.size() - 1);
  }

  HeldChain& chain_;
  const OpKind& kind_;
  const c10::IValue* args_;
  const torch::jit::Stack& snapshots_;
  const std::size_t num_args_;
  const c10::ScalarType self_dtype_;
  const bool float_operands_;
  std::vector<ArgRef> refs_;
  std::vector<ChainInput> new_inputs_;
  std::vector<Identity> new_identities_;
};

// The identity of `into` over the same memory as `e`, or -1.
int same_memory(const HeldChain& into, const Identity& e) {
  for (std::size_t k = 0; k < into.identities.size(); ++k) {
    if (into.identities[k].storage == e.storage) return static_cast<int>(k);
  }
  return -1;
}

}  // namespace

void MemoryIndex::add(const Identity& e, HeldChain* chain) {
  if (writes(e)) {
    auto found = readers.find(e.storage);  // its readers were merged into `chain`
    if (found != readers.end()) readers.erase(found);
    writer[e.storage] = chain;
  } else {
    auto& list = readers[e.storage];
    if (std::find(list.begin(), list.end(), chain) == list.end()) list.push_back(chain);
  }
}

void MemoryIndex::remove(const Identity& e, const HeldChain* chain) {
  auto w = writer.find(e.storage);
  if (w != writer.end() && w->second == chain) writer.erase(w);
  auto r = readers.find(e.storage);
  if (r == readers.end()) return;
  auto& list = r->second;
  list.erase(std::remove(list.begin(), list.end(), chain), list.end());
  if (list.empty()) readers.erase(r);
}

bool append(HeldChain& chain, const OpKind& kind, const char* name, const c10::IValue* args,
            const torch::jit::Stack& snapshots, const at::Tensor& result,
            std::function<void()>& work, std::shared_ptr<void>& keep) {
  Joining joining(chain, kind, args, snapshots);
  if (!joining.describe_arguments()) return false;
  const int defines = joining.defined_identity(result);
  if (defines < 0) return false;
  joining.commit(defines, name, work, keep);
  return true;
}

bool mergeable(const HeldChain& into, const HeldChain& from) {
  for (const Identity& e : from.identities) {
    const int k = same_memory(into, e);
    if (k < 0) continue;
    const Identity& mine = into.identities[k];
    if (mine.caller.unsafeGetTensorImpl() != e.caller.unsafeGetTensorImpl() || writes(mine) ||
        writes(e)) {
      return false;
    }
  }
  return true;
}

void absorb(HeldChain& into, HeldChain& from, MemoryIndex& index) {
  const int steps = static_cast<int>(into.steps.size());
  std::vector<int> identity_at(from.identities.size(), -1);
  std::vector<int> input_at(from.inputs.size(), -1);
  for (std::size_t j = 0; j < from.identities.size(); ++j) {
    const Identity& e = from.identities[j];
    index.remove(e, &from);
    const int k = same_memory(into, e);
    if (k >= 0) {  // the same tensor, only read by both: one input
      identity_at[j] = k;
      input_at[e.input] = into.identities[k].input;
    }
  }
  for (std::size_t i = 0; i < from.inputs.size(); ++i) {
    if (input_at[i] >= 0) continue;
    input_at[i] = static_cast<int>(into.inputs.size());
    into.inputs.push_back(std::move(from.inputs[i]));
  }
  for (std::size_t j = 0; j < from.identities.size(); ++j) {
    if (identity_at[j] >= 0) continue;
    Identity& e = from.identities[j];
    if (e.input >= 0) e.input = input_at[e.input];
    if (e.first_step >= 0) e.first_step += steps;
    if (e.last_step >= 0) e.last_step += steps;
    identity_at[j] = static_cast<int>(into.identities.size());
    into.identities.push_back(std::move(e));
    index.add(into.identities.back(), &into);
  }
  for (HeldStep& step : from.steps) {
    step.identity = identity_at[step.identity];
    for (ArgRef& ref : step.args) {
      if (ref.identity >= 0) ref.identity = identity_at[ref.identity];
      if (ref.kind == RequestArg::kInput) ref.index = input_at[ref.index];
      if (ref.kind == RequestArg::kStep) ref.index += steps;
    }
    into.steps.push_back(std::move(step));
  }
  into.touched = std::max(into.touched, from.touched);
  into.result_bytes += std::exchange(from.result_bytes, 0);
  from.steps.clear();
  from.inputs.clear();
  from.identities.clear();
}

}  // namespace torchneuron::fused_eager
