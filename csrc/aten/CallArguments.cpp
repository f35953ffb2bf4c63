#include "aten/CallArguments.h"

#include "aten/CpuAlias.h"
#include "aten/SignatureKey.h"
#include "device/NeuronAllocator.h"

#include <ATen/core/enum_tag.h>
#include <c10/core/GradMode.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>

namespace torchneuron {
namespace {

at::Tensor tensor_from(c10::Storage storage, const OutTensor& o) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::scalarTypeToTypeMeta(o.dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(o.sizes, o.strides, o.offset);
  if (o.conj) t._set_conj(true);
  if (o.neg) t._set_neg(true);
  return t;
}

// Whether a list holds tensors (or further lists that may): a list without them is the
// worker's as it is.
bool holds_tensors(const c10::List<c10::IValue>& list) {
  for (const c10::IValue& e : list) {
    if (e.isTensor() || e.isList()) return true;
  }
  return false;
}

}  // namespace

CallArguments::CallArguments(const c10::OperatorHandle& op)
    // A pointwise op's results have its inputs' shape whatever its floats' values, so one recipe
    // serves every value (see defer_op).
    : float_values_(!op.hasTag(at::Tag::pointwise)) {
  key_.reserve(256);
  put(key_, &op.schema());
  put(key_, c10::typeMetaToScalarType(c10::get_default_dtype()));
  put(key_, c10::GradMode::is_enabled());  // the worker runs the kernel in the caller's mode
  work_stack_.reserve(op.schema().arguments().size());
}

bool CallArguments::read(const c10::IValue& v,
                         c10::function_ref<void(const at::Tensor&)> on_tensor) {
  c10::IValue snapshot;
  if (!visit(v, snapshot, on_tensor)) return false;
  work_stack_.push_back(std::move(snapshot));
  return true;
}

bool CallArguments::visit(const c10::IValue& v, c10::IValue& snapshot,
                          c10::function_ref<void(const at::Tensor&)> on_tensor) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    on_tensor(t);
    snapshot = visit_tensor(t);
    return ok_;
  }
  if ((!float_values_ && put_number_type(key_, v)) ||  // one recipe for every value
      put_scalar(key_, v)) {                          // a plain value: written
    snapshot = v;
    return true;
  }
  if (v.isDevice()) {
    key_ += 'D';
    put(key_, static_cast<int8_t>(v.toDevice().type()));
    put(key_, v.toDevice().index());
    snapshot = v;
    return true;
  }
  if (v.isGenerator()) {
    key_ += 'G';
    snapshot = v;  // defer_op puts the draws reserved for the call in its place
    return true;
  }
  if (v.isTensorList()) {
    const auto in = v.toTensorList();
    key_ += 'L';
    put(key_, in.size());
    c10::List<at::Tensor> out;
    out.reserve(in.size());
    for (const at::Tensor& t : in) {
      on_tensor(t);
      out.push_back(visit_tensor(t));
      if (!ok_) return false;
    }
    snapshot = std::move(out);
    return true;
  }
  if (v.isList()) {
    const auto in = v.toList();
    key_ += '[';
    put(key_, in.size());
    if (!holds_tensors(in)) {
      c10::IValue unused;
      for (const c10::IValue& e : in) {
        if (!visit(e, unused, on_tensor)) return false;
      }
      snapshot = v;
      return true;
    }
    c10::impl::GenericList out(in.elementType());
    out.reserve(in.size());
    for (const c10::IValue& e : in) {
      c10::IValue s;
      if (!visit(e, s, on_tensor)) return false;
      out.push_back(std::move(s));
    }
    snapshot = std::move(out);
    return true;
  }
  return false;  // symbolic values, objects: not queued
}

at::Tensor CallArguments::visit_tensor(const at::Tensor& t) {
  if (!t.defined()) {
    key_ += 'U';
    return t;
  }
  if (t.device().type() != c10::DeviceType::PrivateUse1) {
    // A CPU tensor argument: a 0-dim one is a scalar, read at the call (copied now, as a
    // kernel launch copies its scalar arguments); any other cannot be read later safely.
    if (t.dim() != 0 || t.layout() != c10::kStrided) {
      ok_ = false;
      return {};
    }
    const bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
    key_ += 'C';
    put(key_, t.scalar_type());
    put(key_, wrapped);
    if (wrapped) return t;
    for (const auto& c : cpu_) {
      if (c.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return c.second;
    }
    cpu_.emplace_back(t, t.clone());
    return cpu_.back().second;
  }
  if (t.layout() != c10::kStrided || !t.has_storage() || t.is_sparse()) {
    ok_ = false;
    return {};
  }
  key_ += 'T';
  std::size_t k = 0;
  while (k < tensors_.size() &&
         tensors_[k].neuron.unsafeGetTensorImpl() != t.unsafeGetTensorImpl()) {
    ++k;
  }
  put(key_, k);  // identity: the first visit of this tensor
  if (k < tensors_.size()) return tensors_[k].snapshot;
  const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  std::size_t j = 0;
  while (j < storages_.size() && storages_[j].neuron.unsafeGetStorageImpl() != impl) ++j;
  if (j == storages_.size()) storages_.push_back({t.storage(), c10::Storage()});
  put(key_, j);  // aliasing: the storage it shares with earlier arguments
  put(key_, t.scalar_type());
  put(key_, t.dim());
  for (int64_t d : t.sizes()) put(key_, d);
  for (int64_t d : t.strides()) put(key_, d);
  put(key_, t.storage_offset());
  put(key_, t.storage().nbytes());
  put(key_, static_cast<char>(t.is_conj() * 2 + t.is_neg()));
  // Kernels may read requires_grad (with the grad mode, in the key from the start), so it is part
  // of the signature and of the snapshot.
  put(key_, t.requires_grad());
  at::Tensor snapshot = tensor_over(t.storage(), c10::DispatchKey::PrivateUse1, t);
  carry_requires_grad(t, snapshot);
  tensors_.push_back({t, std::move(snapshot), j, {}});
  return tensors_.back().snapshot;
}

std::size_t CallArguments::find_tensor(const at::Tensor& t) const {
  for (std::size_t k = 0; k < tensors_.size(); ++k) {
    if (tensors_[k].neuron.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return k;
  }
  TORCH_INTERNAL_ASSERT(false, "neuron: an argument tensor was not visited");
}

at::Tensor CallArguments::meta_of(const at::Tensor& t) {
  if (!t.defined()) return t;
  if (t.device().type() != c10::DeviceType::PrivateUse1) {
    for (const auto& c : cpu_) {
      if (c.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return c.second;
    }
    return t;
  }
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
    carry_requires_grad(t, e.meta);
  }
  return e.meta;
}

bool CallArguments::unchanged() const {
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

std::vector<std::pair<std::size_t, std::vector<int64_t>>> CallArguments::sized_outs() const {
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

std::shared_ptr<Recipe> CallArguments::recipe_of(const torch::jit::Stack& returned) const {
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

std::vector<at::Tensor> CallArguments::argument_tensors() const {
  std::vector<at::Tensor> out;
  for (const auto& e : tensors_) out.push_back(e.neuron);
  return out;
}

std::vector<c10::Storage> CallArguments::argument_storages() const {
  std::vector<c10::Storage> out;
  for (const auto& s : storages_) out.push_back(s.neuron);
  return out;
}

std::vector<c10::IValue> CallArguments::results_of(const Recipe& recipe, c10::DeviceIndex device,
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

}  // namespace torchneuron
