// Every CPU alias of neuron memory is made here (after asking csrc/aten/HostAccess.h).
//
// How a neuron op runs a CPU kernel without copies: for the length of one call, each neuron
// tensor gets a CPU alias (same memory, sizes, strides and offset; one alias storage per neuron
// storage, so aliasing between arguments is preserved), the kernel allocates its outputs and
// scratch from the neuron device's memory (KernelScope), and its results are adopted back as
// neuron tensors: the input itself, a view of an input's storage, or a fresh storage whose
// memory already belongs to the neuron allocator.
#pragma once

#include "aten/KernelScope.h"

#include <ATen/Tensor.h>
#include <c10/util/SmallVector.h>

namespace torchneuron {

class AliasSession {
 public:
  explicit AliasSession(c10::DeviceIndex device);
  ~AliasSession() = default;
  AliasSession(const AliasSession&) = delete;
  AliasSession& operator=(const AliasSession&) = delete;

  // The CPU alias of a neuron tensor (undefined stays undefined); a sparse tensor's alias is a
  // CPU sparse tensor over the aliases of its members (SparseMembers.h).
  at::Tensor to_cpu(const at::Tensor& neuron);
  // The neuron tensor for a CPU kernel's result.
  at::Tensor to_neuron(const at::Tensor& cpu);
  // After the kernel: moves resizes and restrides of aliased arguments (out= ops) back to
  // the neuron tensors and their storages.
  void sync_back();

  c10::DeviceIndex device() const { return device_; }

 private:
  struct StoragePair {
    c10::Storage neuron;
    c10::Storage cpu;
    const void* original_data;
    bool is_argument;  // false for a kernel result adopted by to_neuron
  };
  struct TensorPair {
    at::Tensor neuron;
    at::Tensor cpu;
  };
  c10::Storage adopt_storage(const c10::Storage& cpu);
  at::Tensor wrap(const c10::Storage& storage, const at::Tensor& like);

  c10::DeviceIndex device_;
  KernelScope scope_;
  c10::SmallVector<StoragePair, 4> storages_;
  c10::SmallVector<TensorPair, 4> tensors_;
  c10::SmallVector<TensorPair, 1> sparse_;  // sparse tensors, rebuilt over aliased members
};

// A tensor of dispatch key `key` (PrivateUse1, CPU, Meta) over `storage` with the dtype, sizes,
// strides, offset and conj/neg bits of `like`.
at::Tensor tensor_over(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like);
// Gives `to` (a fresh leaf over the same memory: a CPU alias, a queued op's snapshot, a meta
// stand-in) the requires_grad of `from`. A CPU kernel must see what the CPU's own kernel would
// see, requires_grad included: some compute what only the backward needs when an input requires
// grad and grad mode is on (_sparse_mm_reduce_impl keeps the argmax/argmin of "amax"/"amin" only
// then; without the flag the backward indexed an empty arg_out and the process died with
// SIGSEGV). The kernel runs below autograd (run_cpu_kernel), so nothing it calls records a graph.
void carry_requires_grad(const at::Tensor& from, at::Tensor& to);
// Same sizes, strides and storage offset.
bool same_geometry(const at::Tensor& a, const at::Tensor& b);

// A neuron tensor over `storage` with the dtype, sizes, strides, offset and conj/neg bits of
// `like`.
at::Tensor make_neuron_tensor(c10::Storage storage, const at::Tensor& like);

// A CPU tensor over a neuron tensor's memory (same bytes, sizes, strides, offset) that holds a
// reference to the neuron storage, so that it stays valid after the caller drops the neuron
// tensor and outside any AliasSession: what torchneuron.distributed hands to gloo, which may
// still be working on it on its own threads after an async collective returns.
at::Tensor cpu_alias_keeping_storage(const at::Tensor& neuron);

// A CPU tensor with the metadata of `t` (dtype, sizes, strides, offset, requires_grad), symbolic
// ones included, over a storage without data: for CPU functions that only read metadata (the
// attention kernel choice), which torch.compile and torch.export call with fake tensors whose
// sizes are symbolic and whose memory does not exist.
at::Tensor cpu_metadata_stand_in(const at::Tensor& t);

}  // namespace torchneuron
