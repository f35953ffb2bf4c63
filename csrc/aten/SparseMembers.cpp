#include "aten/SparseMembers.h"

#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/core/TensorBody.h>

namespace torchneuron {
namespace {

bool is_compressed(c10::Layout layout) {
  return layout == c10::kSparseCsr || layout == c10::kSparseCsc || layout == c10::kSparseBsr ||
         layout == c10::kSparseBsc;
}

at::SparseTensorImpl* coo_impl(const at::Tensor& t) {
  return static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
}

at::SparseCsrTensorImpl* compressed_impl(const at::Tensor& t) {
  return static_cast<at::SparseCsrTensorImpl*>(t.unsafeGetTensorImpl());
}

c10::DispatchKey sparse_key(c10::Layout layout, c10::Device device) {
  const bool cpu = device.type() == c10::kCPU;
  if (layout == c10::kSparse) return cpu ? c10::DispatchKey::SparseCPU
                                         : c10::DispatchKey::SparsePrivateUse1;
  return cpu ? c10::DispatchKey::SparseCsrCPU : c10::DispatchKey::SparseCsrPrivateUse1;
}

void check_layout(const at::Tensor& t) {
  TORCH_CHECK(t.layout() == c10::kSparse || is_compressed(t.layout()),
              "neuron supports strided, sparse COO and sparse compressed (CSR, CSC, BSR, BSC) "
              "tensors, got layout ", t.layout());
}

void set_coo(const at::Tensor& dst, const at::Tensor& src, const MemberMap& member) {
  at::SparseTensorImpl* s = coo_impl(src);
  at::SparseTensorImpl* d = coo_impl(dst);
  // raw_resize_ first: set_indices_and_values_unsafe checks the members against the dims.
  d->raw_resize_(s->sparse_dim(), s->dense_dim(), src.sizes());
  d->set_indices_and_values_unsafe(member(s->indices()), member(s->values()));
  d->set_coalesced(s->coalesced());
}

void set_compressed(const at::Tensor& dst, const at::Tensor& src, const MemberMap& member) {
  at::SparseCsrTensorImpl* s = compressed_impl(src);
  at::SparseCsrTensorImpl* d = compressed_impl(dst);
  d->set_layout(src.layout());
  d->set_member_tensors(member(s->compressed_indices()), member(s->plain_indices()),
                        member(s->values()), src.sizes());
}

bool same(const at::Tensor& mapped, const at::Tensor& existing) {
  return mapped.unsafeGetTensorImpl() == existing.unsafeGetTensorImpl();
}

}  // namespace

bool is_sparse_layout(const at::Tensor& t) {
  return t.defined() && t.layout() != c10::kStrided;
}

at::Tensor rebuild_sparse(const at::Tensor& src, c10::Device device, const MemberMap& member) {
  check_layout(src);
  const c10::DispatchKeySet keys(sparse_key(src.layout(), device));
  if (src.layout() == c10::kSparse) {
    auto dst = at::detail::make_tensor<at::SparseTensorImpl>(keys, src.dtype());
    set_coo(dst, src, member);
    return dst;
  }
  auto dst = at::detail::make_tensor<at::SparseCsrTensorImpl>(keys, device, src.layout(),
                                                              src.dtype());
  set_compressed(dst, src, member);
  return dst;
}

void assign_sparse(const at::Tensor& dst, const at::Tensor& src, const MemberMap& member) {
  if (src.layout() == c10::kSparse) {
    at::SparseTensorImpl* s = coo_impl(src);
    at::SparseTensorImpl* d = coo_impl(dst);
    const at::Tensor indices = member(s->indices());
    const at::Tensor values = member(s->values());
    if (s->sparse_dim() == d->sparse_dim() && s->dense_dim() == d->dense_dim() &&
        src.sizes().equals(dst.sizes()) && s->coalesced() == d->coalesced() &&
        same(indices, d->indices()) && same(values, d->values())) {
      return;
    }
    d->raw_resize_(s->sparse_dim(), s->dense_dim(), src.sizes());
    d->set_indices_and_values_unsafe(indices, values);
    d->set_coalesced(s->coalesced());
    return;
  }
  at::SparseCsrTensorImpl* s = compressed_impl(src);
  at::SparseCsrTensorImpl* d = compressed_impl(dst);
  const at::Tensor compressed = member(s->compressed_indices());
  const at::Tensor plain = member(s->plain_indices());
  const at::Tensor values = member(s->values());
  if (src.layout() == dst.layout() && src.sizes().equals(dst.sizes()) &&
      same(compressed, d->compressed_indices()) && same(plain, d->plain_indices()) &&
      same(values, d->values())) {
    return;
  }
  d->set_layout(src.layout());
  d->set_member_tensors(compressed, plain, values, src.sizes());
}

c10::DispatchKey cpu_counterpart(c10::DispatchKey neuron_key) {
  switch (neuron_key) {
    case c10::DispatchKey::SparsePrivateUse1:
      return c10::DispatchKey::SparseCPU;
    case c10::DispatchKey::SparseCsrPrivateUse1:
      return c10::DispatchKey::SparseCsrCPU;
    default:
      return c10::DispatchKey::CPU;
  }
}

}  // namespace torchneuron
