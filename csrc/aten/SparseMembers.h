// Sparse tensors (COO and the compressed layouts CSR/CSC/BSR/BSC) own no memory of their own:
// their indices and values are dense tensors. A sparse tensor moves between the CPU and neuron
// sides of a kernel call (CpuAlias.h) by rebuilding it over its members, each member mapped on
// its own (to its CPU alias, or back to the neuron tensor it aliases).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>

#include <functional>

namespace torchneuron {

using MemberMap = std::function<at::Tensor(const at::Tensor&)>;

bool is_sparse_layout(const at::Tensor& t);

// A sparse tensor with `src`'s layout, sizes, dims and coalesced flag on `device`, whose members
// are member(src's members).
at::Tensor rebuild_sparse(const at::Tensor& src, c10::Device device, const MemberMap& member);

// After a kernel changed `src` in place (new members, a resize, coalescing): gives `dst` the
// same metadata over member(src's members). Does nothing when nothing changed.
void assign_sparse(const at::Tensor& dst, const at::Tensor& src, const MemberMap& member);

// The CPU dispatch key a neuron dispatch key's kernel runs as: SparsePrivateUse1 -> SparseCPU,
// SparseCsrPrivateUse1 -> SparseCsrCPU, anything else -> CPU.
c10::DispatchKey cpu_counterpart(c10::DispatchKey neuron_key);

}  // namespace torchneuron
