// Walking the tensors inside an op's arguments or results (IValues): a tensor, a list of
// tensors, or lists that hold tensors or further lists (all_gather's list of lists). The boxed
// fallback and the Works of collectives (csrc/distributed/) both walk them this way.
#pragma once

#include <ATen/core/ivalue.h>

namespace torchneuron {

template <typename Fn>
void for_each_tensor(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) fn(t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) for_each_tensor(e, fn);
  }
}

// `v` with every tensor replaced by fn(tensor); lists without tensors are returned as they are.
template <typename Fn>
c10::IValue map_tensors(const c10::IValue& v, Fn&& fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    const auto in = v.toTensorList();
    out.reserve(in.size());
    for (const at::Tensor& t : in) out.push_back(fn(t));
    return out;
  }
  if (v.isList()) {
    const auto in = v.toList();
    bool holds_tensors = false;
    for (const c10::IValue& e : in) holds_tensors = holds_tensors || e.isTensor() || e.isList();
    if (!holds_tensors) return v;
    c10::impl::GenericList out(in.elementType());
    out.reserve(in.size());
    for (const c10::IValue& e : in) out.push_back(map_tensors(e, fn));
    return out;
  }
  return v;
}

}  // namespace torchneuron
