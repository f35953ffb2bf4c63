#include "aten/DeferredOp.h"

#include "aten/CpuAlias.h"
#include "aten/Fallback.h"
#include "aten/IValueTensors.h"
#include "aten/SignatureKey.h"
#include "aten/Launch.h"
#include "device/NeuronAllocator.h"
#include "device/NeuronGenerator.h"
#include "profiler/KernelActivity.h"

#include <ATen/core/enum_tag.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/resize_ops.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace torchneuron {
namespace {

// Ops found not deferrable: their meta call failed this many times and never succeeded (no meta
// function, or one that needs data). A user's shape error fails it too, so one failure is not
// enough; a success clears the count.
constexpr int kMetaFailuresBeforeGivingUp = 3;
std::mutex g_failures_mutex;
std::unordered_map<const c10::FunctionSchema*, int>& meta_failures() {
  static auto* map = new std::unordered_map<const c10::FunctionSchema*, int>();
  return *map;
}

bool given_up(const c10::FunctionSchema* schema) {
  std::lock_guard<std::mutex> lock(g_failures_mutex);
  auto it = meta_failures().find(schema);
  return it != meta_failures().end() && it->second >= kMetaFailuresBeforeGivingUp;
}

void count_meta(const c10::FunctionSchema* schema, bool ok) {
  std::lock_guard<std::mutex> lock(g_failures_mutex);
  if (ok) {
    meta_failures().erase(schema);
  } else {
    ++meta_failures()[schema];
  }
}

bool is_tensor_like(c10::TypePtr type) {
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto list = type->cast<c10::ListType>()) return is_tensor_like(list->getElementType());
  return false;
}

// The index of the op's Generator (or Generator?) argument, if it has one.
std::optional<std::size_t> generator_argument(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    c10::TypePtr type = args[i].type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) return i;
  }
  return std::nullopt;
}

// Whether the op can be queued at all, from its schema alone.
bool schema_deferrable(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  if (schema.name().rfind("aten::", 0) != 0 || schema.is_vararg()) {
    return false;
  }
  for (const auto& ret : schema.returns()) {
    if (!is_tensor_like(ret.type())) return false;  // item(), equal(), is_nonzero(): data
  }
  return true;
}

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

constexpr std::size_t kMaxRecipes = 1 << 16;
std::mutex g_recipes_mutex;
std::unordered_map<std::string, std::shared_ptr<const Recipe>>& recipes() {
  static auto* map = new std::unordered_map<std::string, std::shared_ptr<const Recipe>>();
  return *map;
}

struct Result;

// The arguments as the meta call sees them and as the worker will: per neuron tensor a meta
// tensor and a snapshot (its metadata now), one of each per tensor and one meta storage per
// neuron storage, so that identity and aliasing between arguments carry over. Visiting them
// also writes the call's signature (everything a result's metadata can depend on).
class Arguments {
 public:
  bool ok = true;  // false: an argument the queue cannot take
  // False: floats are written by their type only (see defer_op).
  bool float_values = true;

  // Appends `v` to the signature, registering its tensors; false when it cannot be described.
  bool visit(const c10::IValue& v, std::string& key) {
    if (v.isTensor()) {
      visit_tensor(v.toTensor(), key);
    } else if (!float_values && put_number_type(key, v)) {  // one recipe for every value
    } else if (put_scalar(key, v)) {  // a plain value: written
    } else if (v.isDevice()) {
      key += 'D';
      put(key, static_cast<int8_t>(v.toDevice().type()));
      put(key, v.toDevice().index());
    } else if (v.isGenerator()) {
      key += 'G';
    } else if (v.isTensorList()) {
      key += 'L';
      put(key, v.toTensorList().size());
      for (const at::Tensor& t : v.toTensorList()) visit_tensor(t, key);
    } else if (v.isList()) {
      key += '[';
      put(key, v.toListRef().size());
      for (const c10::IValue& e : v.toListRef()) {
        if (!visit(e, key)) return false;
      }
    } else {
      return false;  // symbolic values, objects: not queued
    }
    return ok;
  }

  at::Tensor meta_of(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.device().type() != c10::DeviceType::PrivateUse1) return snapshot_of(t);
    TensorEntry& e = tensors_[find_tensor(t)];
    if (!e.meta.defined()) {
      StorageEntry& s = storages_[e.storage];
      if (!s.meta) {
        s.meta = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
            c10::StorageImpl::use_byte_size_t(), s.neuron.nbytes(),
            c10::DataPtr(nullptr, c10::Device(c10::kMeta)), c10::GetAllocator(c10::kMeta),
            /*resizable=*/true));
      }
      e.meta = tensor_over(s.meta, c10::DispatchKey::Meta, t);
    }
    return e.meta;
  }

  at::Tensor snapshot_of(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      for (const auto& c : cpu_) {
        if (c.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return c.second;
      }
      return t;
    }
    return tensors_[find_tensor(t)].snapshot;
  }

  // After the meta call: every argument kept its metadata (no resize, restride or set_).
  bool unchanged() const {
    for (const auto& e : tensors_) {
      if (!e.meta.defined()) continue;
      const StorageEntry& s = storages_[e.storage];
      if (!same_geometry(e.meta, e.neuron) ||
          e.meta.storage().unsafeGetStorageImpl() != s.meta.unsafeGetStorageImpl() ||
          s.meta.nbytes() != s.neuron.nbytes()) {
        return false;
      }
    }
    return true;
  }

  // The empty out= arguments the meta call sized (see Recipe::resize), when that was the only
  // change it made to an argument; empty otherwise.
  std::vector<std::pair<std::size_t, std::vector<int64_t>>> sized_outs() const {
    std::vector<std::pair<std::size_t, std::vector<int64_t>>> sized;
    for (std::size_t k = 0; k < tensors_.size(); ++k) {
      const TensorEntry& e = tensors_[k];
      if (!e.meta.defined()) continue;
      const StorageEntry& s = storages_[e.storage];
      const bool own_storage = e.meta.storage().unsafeGetStorageImpl() ==
                               s.meta.unsafeGetStorageImpl();
      if (same_geometry(e.meta, e.neuron) && own_storage && s.meta.nbytes() == s.neuron.nbytes()) {
        continue;
      }
      const bool alone = std::count_if(tensors_.begin(), tensors_.end(), [&](const TensorEntry& o) {
                           return o.storage == e.storage;
                         }) == 1;
      if (!(alone && own_storage && s.neuron.nbytes() == 0 && e.meta.numel() > 0 &&
            e.meta.is_contiguous() && e.meta.storage_offset() == 0 &&
            e.meta.scalar_type() == e.neuron.scalar_type())) {
        return {};
      }
      sized.emplace_back(k, e.meta.sizes().vec());
    }
    return sized;
  }

  // The recipe for the meta call's results; null when a result is not a strided meta tensor
  // or the results are not tensors, lists of tensors or None.
  std::shared_ptr<Recipe> recipe_of(const torch::jit::Stack& returned) const {
    auto recipe = std::make_shared<Recipe>();
    std::vector<const c10::StorageImpl*> fresh;
    bool fine = true;
    auto describe = [&](const at::Tensor& meta) {
      OutTensor o;
      if (!meta.defined()) return recipe->outs.push_back(o);
      if (meta.device().type() != c10::kMeta || meta.layout() != c10::kStrided) {
        fine = false;
        return;
      }
      o.dtype = meta.scalar_type();
      o.sizes.assign(meta.sizes().begin(), meta.sizes().end());
      o.strides.assign(meta.strides().begin(), meta.strides().end());
      o.offset = meta.storage_offset();
      o.conj = meta.is_conj();
      o.neg = meta.is_neg();
      for (std::size_t k = 0; k < tensors_.size(); ++k) {
        if (tensors_[k].meta.defined() &&
            tensors_[k].meta.unsafeGetTensorImpl() == meta.unsafeGetTensorImpl()) {
          o.kind = OutTensor::kArgument;
          o.index = static_cast<int>(k);
          return recipe->outs.push_back(o);
        }
      }
      const c10::StorageImpl* impl = meta.storage().unsafeGetStorageImpl();
      for (std::size_t j = 0; j < storages_.size(); ++j) {
        if (storages_[j].meta.unsafeGetStorageImpl() == impl) {
          o.kind = OutTensor::kView;
          o.index = static_cast<int>(j);
          return recipe->outs.push_back(o);
        }
      }
      o.kind = OutTensor::kFresh;
      auto it = std::find(fresh.begin(), fresh.end(), impl);
      o.index = static_cast<int>(it - fresh.begin());
      if (it == fresh.end()) {
        fresh.push_back(impl);
        recipe->fresh_nbytes.push_back(meta.storage().nbytes());
      }
      recipe->outs.push_back(o);
    };
    for (const c10::IValue& v : returned) {
      if (v.isTensor()) {
        recipe->returns.push_back({ReturnSlot::kTensor, 1});
        describe(v.toTensor());
      } else if (v.isTensorList()) {
        const auto list = v.toTensorList();
        recipe->returns.push_back({ReturnSlot::kList, static_cast<int>(list.size())});
        for (const at::Tensor& t : list) describe(t);
      } else if (v.isNone()) {
        recipe->returns.push_back({ReturnSlot::kNone, 0});
      } else {
        fine = false;
      }
    }
    return fine ? recipe : nullptr;
  }

  // The neuron argument tensors (recipe indices of kArgument) and storages (of kView).
  std::vector<at::Tensor> argument_tensors() const {
    std::vector<at::Tensor> out;
    for (const auto& e : tensors_) out.push_back(e.neuron);
    return out;
  }
  std::vector<c10::Storage> argument_storages() const {
    std::vector<c10::Storage> out;
    for (const auto& s : storages_) out.push_back(s.neuron);
    return out;
  }

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

  std::size_t find_tensor(const at::Tensor& t) const {
    for (std::size_t k = 0; k < tensors_.size(); ++k) {
      if (tensors_[k].neuron.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return k;
    }
    TORCH_INTERNAL_ASSERT(false, "neuron: an argument tensor was not visited");
  }

  void visit_tensor(const at::Tensor& t, std::string& key) {
    if (!t.defined()) {
      key += 'U';
      return;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      // A CPU tensor argument: a 0-dim one is a scalar, read at the call (copied now, as a
      // kernel launch copies its scalar arguments); any other cannot be read later safely.
      if (t.dim() != 0 || t.layout() != c10::kStrided) {
        ok = false;
        return;
      }
      key += 'C';
      put(key, t.scalar_type());
      put(key, t.unsafeGetTensorImpl()->is_wrapped_number());
      if (!t.unsafeGetTensorImpl()->is_wrapped_number()) cpu_.push_back({t, t.clone()});
      return;
    }
    if (t.layout() != c10::kStrided || !t.has_storage() || t.is_sparse()) {
      ok = false;
      return;
    }
    key += 'T';
    std::size_t k = 0;
    while (k < tensors_.size() &&
           tensors_[k].neuron.unsafeGetTensorImpl() != t.unsafeGetTensorImpl()) {
      ++k;
    }
    put(key, k);  // identity: the first visit of this tensor
    if (k < tensors_.size()) return;
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    std::size_t j = 0;
    while (j < storages_.size() && storages_[j].neuron.unsafeGetStorageImpl() != impl) ++j;
    if (j == storages_.size()) storages_.push_back({t.storage(), c10::Storage()});
    put(key, j);  // aliasing: the storage it shares with earlier arguments
    put(key, t.scalar_type());
    put(key, t.dim());
    for (int64_t d : t.sizes()) put(key, d);
    for (int64_t d : t.strides()) put(key, d);
    put(key, t.storage_offset());
    put(key, t.storage().nbytes());
    put(key, static_cast<char>(t.is_conj() * 2 + t.is_neg()));
    tensors_.push_back({t, tensor_over(t.storage(), c10::DispatchKey::PrivateUse1, t), j, {}});
  }

  c10::SmallVector<TensorEntry, 4> tensors_;
  c10::SmallVector<StorageEntry, 4> storages_;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 2> cpu_;
};

struct Result {
  at::Tensor neuron;  // what the caller got
  bool fresh;         // memory of its own, to be written by the kernel
};

at::Tensor tensor_from(c10::Storage storage, const OutTensor& o) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(o.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
  if (o.conj) t._set_conj(true);
  if (o.neg) t._set_neg(true);
  return t;
}

std::vector<c10::IValue> Arguments::results_of(const Recipe& recipe, c10::DeviceIndex device,
                                               std::vector<Result>& results) const {
  std::vector<c10::Storage> fresh;
  fresh.reserve(recipe.fresh_nbytes.size());
  const c10::Device d(c10::DeviceType::PrivateUse1, device);
  for (std::size_t nbytes : recipe.fresh_nbytes) {
    fresh.emplace_back(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes,
        neuron_allocator().allocate_on(device, nbytes, d), &neuron_allocator(),
        /*resizable=*/true));
  }
  auto make = [&](const OutTensor& o) -> at::Tensor {
    switch (o.kind) {
      case OutTensor::kUndefined: results.push_back({at::Tensor(), false}); break;
      case OutTensor::kArgument: results.push_back({tensors_[o.index].neuron, false}); break;
      case OutTensor::kView:
        results.push_back({tensor_from(storages_[o.index].neuron, o), false});
        break;
      case OutTensor::kFresh: results.push_back({tensor_from(fresh[o.index], o), true}); break;
    }
    return results.back().neuron;
  };
  std::vector<c10::IValue> returned;
  std::size_t next = 0;
  for (const ReturnSlot& slot : recipe.returns) {
    if (slot.kind == ReturnSlot::kTensor) {
      returned.emplace_back(make(recipe.outs[next++]));
    } else if (slot.kind == ReturnSlot::kList) {
      c10::List<at::Tensor> list;
      for (int i = 0; i < slot.count; ++i) list.push_back(make(recipe.outs[next++]));
      returned.emplace_back(std::move(list));
    } else {
      returned.emplace_back();
    }
  }
  return returned;
}

// On the worker: the CPU kernel on the snapshots; fresh results land in their memory.
void run_queued(const c10::OperatorHandle& op, c10::DispatchKeySet ks, c10::DeviceIndex device,
                torch::jit::Stack& stack, const std::vector<Result>& results) {
  const auto& schema = op.schema();
  profiler::KernelActivityScope activity(schema.name(), device);
  if (activity.active()) activity.inputs(stack.data(), stack.size());

  // Fresh results of distinct sizes become the kernel's allocation targets (OutputBlocks).
  c10::SmallVector<OutputBlocks::Block, 2> blocks;
  for (const Result& r : results) {
    if (!r.fresh) continue;
    const std::size_t nbytes = r.neuron.storage().nbytes();
    void* data = r.neuron.storage().mutable_data();
    bool clash = nbytes == 0;
    for (auto& b : blocks) {
      if (b.data == data) clash = true;  // two results over one storage: already listed
      if (b.nbytes == nbytes && b.data != data) b.nbytes = 0;  // same size: no target
    }
    if (!clash) blocks.push_back({data, nbytes});
  }

  AliasSession session(device);
  {
    OutputBlocks targets(std::move(blocks));
    run_cpu_kernel(op, ks, &stack, session);
  }
  std::vector<at::Tensor> produced;
  for (const c10::IValue& v : stack) {
    for_each_tensor(v, [&](const at::Tensor& t) { produced.push_back(t); });
  }
  TORCH_CHECK(produced.size() == results.size(), "neuron: ", schema.name(), " returned ",
              produced.size(), " tensors where its meta function returned ", results.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const at::Tensor& cpu = produced[i];
    if (!r.fresh || !r.neuron.defined()) continue;
    if (cpu.defined() && cpu.const_data_ptr() == r.neuron.const_data_ptr() &&
        cpu.dtype() == r.neuron.dtype() && same_geometry(cpu, r.neuron)) {
      continue;  // written in place
    }
    TORCH_CHECK(cpu.defined() && cpu.sizes().equals(r.neuron.sizes()), "neuron: ",
                schema.name(), "'s CPU kernel returned a result of shape ",
                cpu.defined() ? cpu.sizes() : c10::IntArrayRef(), " where its meta function said ",
                r.neuron.sizes());
    at::Tensor target = session.to_cpu(r.neuron);
    at::_ops::copy_::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), target, cpu, false);
  }
  if (activity.active()) {
    for (const Result& r : results) activity.outputs({&r.neuron});
  }
}

std::atomic<const OpHolder*> g_op_holder{nullptr};

// The worker's tensors over the memory of `stream`'s own blocks without a reference to it, as an
// accelerator's queue holds none: when the program drops a tensor this work still reads or
// writes, its block returns to the allocator at once, for later work on this stream only until
// this work ran (NeuronCachingAllocator::use_in_stream_order). Holding a reference instead kept
// every queued op's inputs and results alive until it ran, so a loop queued far ahead of the
// device held all of its intermediates at once (40 ops on 100 MiB: 4.1 GiB where the sync mode
// needs 300 MiB). Tensors sharing a storage share one unreferenced storage (memory-overlap checks
// compare storages); other memory (another stream's, recorded, shared or not the allocator's)
// stays referenced.
void use_in_stream_order(torch::jit::Stack& work_stack, std::vector<Result>& results,
                         const c10::Stream& stream, const rt::StreamClock* clock) {
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages;
  auto unreferenced = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || !t.has_storage()) {
      return t;
    }
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto known = std::find_if(storages.begin(), storages.end(),
                              [&](const auto& s) { return s.first == impl; });
    if (known == storages.end()) {
      c10::Storage unowned;
      if (NeuronCachingAllocator::use_in_stream_order(t.storage(), stream, clock)) {
        void* data = const_cast<void*>(t.storage().data());
        unowned = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
            c10::StorageImpl::use_byte_size_t(), t.storage().nbytes(),
            c10::DataPtr(data, data, nullptr, t.storage().device()), /*allocator=*/nullptr,
            /*resizable=*/false));
      }
      storages.emplace_back(impl, std::move(unowned));
      known = storages.end() - 1;
    }
    return known->second ? tensor_over(known->second, c10::DispatchKey::PrivateUse1, t) : t;
  };
  for (c10::IValue& v : work_stack) v = map_tensors(v, unreferenced);
  for (Result& r : results) r.neuron = unreferenced(r.neuron);
}

}  // namespace

void set_op_holder(const OpHolder* holder) { g_op_holder.store(holder); }

bool defer_op(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
              c10::DeviceIndex device, bool hold, RecipeCheck* check) {
  const auto& schema = op.schema();
  if (!schema_deferrable(op) || given_up(&schema)) return false;
  if (ks.highestPriorityTypeId() != c10::DispatchKey::PrivateUse1) return false;  // sparse
  const std::size_t num_args = schema.arguments().size();
  const std::size_t begin = stack->size() - num_args;

  // The call's signature: the op, the default dtype (factories read it) and every argument.
  // A pointwise op's results have its inputs' shape whatever its floats' values, so one recipe
  // serves every value: a step size or learning rate that changes every step (addcdiv_'s
  // value=, add_'s alpha=) would otherwise make each call the first of its signature, which
  // runs at the call after the queue drains. Python floats at Tensor positions (x * 0.5) are
  // wrapped numbers, keyed by type already.
  Arguments args;
  args.float_values = !op.hasTag(at::Tag::pointwise);
  std::string key;
  key.reserve(256);
  put(key, &schema);
  put(key, c10::typeMetaToScalarType(c10::get_default_dtype()));
  for (std::size_t i = 0; i < num_args; ++i) {
    if (!args.visit((*stack)[begin + i], key)) return false;
  }

  std::shared_ptr<const Recipe> recipe;
  {
    std::lock_guard<std::mutex> lock(g_recipes_mutex);
    auto it = recipes().find(key);
    if (it != recipes().end()) recipe = it->second;
  }
  if (recipe && !recipe->queue) return false;
  if (recipe && !recipe->resize.empty()) {
    // Nothing is in an empty out= argument to keep: it gets its memory at the call, as CUDA's
    // resize_output does, and the call then has a signature of its own (the sizes differ), so
    // this branch is not taken again for it.
    const std::vector<at::Tensor> tensors = args.argument_tensors();
    for (const auto& [k, sizes] : recipe->resize) {
      at::_ops::resize_::redispatch(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), tensors[k],
                                    c10::fromIntArrayRefSlow(sizes), std::nullopt);
    }
    return defer_op(op, ks, stack, device, hold, check);
  }
  if (!recipe) {
    // A signature's first call: the meta function's answer, checked against the CPU kernel's
    // results of this call, which runs now (see RecipeCheck).
    torch::jit::Stack meta_stack;
    meta_stack.reserve(num_args);
    for (std::size_t i = 0; i < num_args; ++i) {
      const c10::IValue& v = (*stack)[begin + i];
      if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
        meta_stack.emplace_back(c10::Device(c10::kMeta));
      } else {
        meta_stack.push_back(map_tensors(v, [&](const at::Tensor& t) { return args.meta_of(t); }));
      }
    }
    try {
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
    } catch (const std::exception&) {
      // Run now: the CPU kernel raises the op's own error, or computes what meta could not.
      count_meta(&schema, false);
      return false;
    }
    count_meta(&schema, true);
    if (!args.unchanged()) {
      auto sized = args.sized_outs();
      if (!sized.empty()) {  // this call runs now; later ones size their outs and queue
        auto made = std::make_shared<Recipe>();
        made->resize = std::move(sized);
        std::lock_guard<std::mutex> lock(g_recipes_mutex);
        if (recipes().size() >= kMaxRecipes) recipes().clear();
        recipes().emplace(std::move(key), std::move(made));
      }
      return false;
    }
    std::shared_ptr<Recipe> made = args.recipe_of(meta_stack);
    if (!made) return false;
    if (check != nullptr) {
      check->key_ = std::move(key);
      check->recipe_ = std::move(made);
      check->tensors_ = args.argument_tensors();
      check->storages_ = args.argument_storages();
    }
    return false;
  }

  // Results are allocated for this work, queued on the current stream after everything queued
  // on it so far: they may take memory that earlier work there still uses, unreferenced.
  const c10::Stream stream = launch::current_stream(device);
  const rt::StreamClock* clock = launch::collecting() ? nullptr : launch::stream_clock(stream);
  std::vector<Result> results;
  std::vector<c10::IValue> returned;
  {
    NeuronCachingAllocator::StreamOrderedAllocations ordered(clock);
    returned = args.results_of(*recipe, device, results);
  }
  // The worker holds its own tensors over the results' memory: dropping the last reference to a
  // tensor that has a Python object takes the GIL, which the worker should not need.
  for (Result& r : results) {
    if (r.neuron.defined()) {
      r.neuron = tensor_over(r.neuron.storage(), c10::DispatchKey::PrivateUse1, r.neuron);
    }
  }

  // The worker's stack: snapshots of the neuron arguments, copies of CPU scalars, and for a
  // random op a generator holding the draws reserved for it now (in call order).
  torch::jit::Stack work_stack;
  work_stack.reserve(num_args);
  for (std::size_t i = 0; i < num_args; ++i) {
    work_stack.push_back(
        map_tensors((*stack)[begin + i], [&](const at::Tensor& t) { return args.snapshot_of(t); }));
  }
  if (const auto g = generator_argument(schema)) {
    const c10::IValue& v = (*stack)[begin + *g];
    const at::Generator source = v.isGenerator() ? v.toGenerator() : default_generator(device);
    if (!is_neuron_generator(source)) return false;  // the fallback decides what a CPU one does
    int64_t drawn = 0;  // one value per result element, as the fallback counts them
    for (const Result& r : results) drawn += r.neuron.defined() ? r.neuron.numel() : 0;
    work_stack[*g] = reserve_draws(source, drawn);
  }
  const char* name = schema.name().c_str();
  const OpHolder* holder = g_op_holder.load(std::memory_order_acquire);
  if (hold && holder != nullptr && returned.size() == 1 && returned[0].isTensor()) {
    // Fused mode: the op may be held back, to run fused with the ops around it. Its unfused run
    // uses the stream's memory unreferenced, as queued work does; while it is held, `keep`
    // references that memory (the chain counts those references as its own, see
    // FusedChain.cpp's live()).
    const auto strong = std::make_shared<std::pair<torch::jit::Stack, std::vector<Result>>>(
        work_stack, results);
    if (clock != nullptr) use_in_stream_order(work_stack, results, stream, clock);
    std::function<void()> work = [op, ks, device, work_stack, results]() mutable {
      run_queued(op, ks, device, work_stack, results);
    };
    std::shared_ptr<void> keep = strong;
    if (!holder->hold(op, device, &(*stack)[begin], strong->first, returned[0].toTensor(), work,
                      keep)) {
      launch::enqueue(stream, name, std::move(work));
    }
  } else {
    if (clock != nullptr) use_in_stream_order(work_stack, results, stream, clock);
    launch::enqueue(stream, name,
                  [op, ks, device, work_stack = std::move(work_stack),
                   results = std::move(results)]() mutable {
                    run_queued(op, ks, device, work_stack, results);
                  });
  }

  stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(begin), stack->end());
  for (auto& v : returned) stack->push_back(std::move(v));
  return true;
}

RecipeCheck::RecipeCheck() = default;
RecipeCheck::~RecipeCheck() = default;

void RecipeCheck::confirm(const torch::jit::Stack& stack, std::size_t num_returns) {
  if (!recipe_) return;
  auto* recipe = static_cast<Recipe*>(recipe_.get());
  std::vector<at::Tensor> produced;
  bool same = true;
  std::size_t slot = 0;
  for (std::size_t i = stack.size() - num_returns; i < stack.size(); ++i, ++slot) {
    const c10::IValue& v = stack[i];
    const ReturnSlot expected = slot < recipe->returns.size() ? recipe->returns[slot]
                                                              : ReturnSlot{ReturnSlot::kNone, -1};
    if (v.isTensor()) {
      same = same && expected.kind == ReturnSlot::kTensor;
    } else if (v.isTensorList()) {
      same = same && expected.kind == ReturnSlot::kList &&
             static_cast<int>(v.toTensorList().size()) == expected.count;
    } else {
      same = same && v.isNone() && expected.kind == ReturnSlot::kNone;
    }
    for_each_tensor(v, [&](const at::Tensor& t) { produced.push_back(t); });
  }
  same = same && slot == recipe->returns.size() && produced.size() == recipe->outs.size();
  for (std::size_t i = 0; same && i < produced.size(); ++i) {
    const at::Tensor& t = produced[i];
    const OutTensor& o = recipe->outs[i];
    if (o.kind == OutTensor::kUndefined) {
      same = !t.defined();
      continue;
    }
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 ||
        t.layout() != c10::kStrided || t.scalar_type() != o.dtype ||
        !t.sizes().equals(o.sizes) || !t.strides().equals(o.strides) ||
        t.storage_offset() != o.offset || t.is_conj() != o.conj || t.is_neg() != o.neg) {
      same = false;
      continue;
    }
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    auto argument_storage = std::find_if(storages_.begin(), storages_.end(),
        [&](const c10::Storage& s) { return s.unsafeGetStorageImpl() == storage; });
    switch (o.kind) {
      case OutTensor::kArgument:
        same = tensors_[o.index].unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
        break;
      case OutTensor::kView:
        same = storages_[o.index].unsafeGetStorageImpl() == storage;
        break;
      case OutTensor::kFresh:
        same = argument_storage == storages_.end();
        break;
      case OutTensor::kUndefined:
        break;
    }
  }
  // Where the CPU kernel and the meta function disagree (native_batch_norm's saved statistics
  // in eval mode: [0] on the CPU, [C] from meta), the signature runs now from then on.
  recipe->queue = same;
  std::lock_guard<std::mutex> lock(g_recipes_mutex);
  if (recipes().size() >= kMaxRecipes) recipes().clear();
  recipes().emplace(std::move(key_), std::static_pointer_cast<const Recipe>(recipe_));
}

}  // namespace torchneuron
