#include "aten/CpuAlias.h"

#include "aten/HostAccess.h"
#include "aten/SparseMembers.h"
#include "device/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/ProtectedMemory.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

namespace torchneuron {
namespace {

c10::Device neuron_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, index);
}

// What a Python-level CPU alias holds: the neuron storage, and a host access window for as long
// as the alias lives. An alias is a declared host access (gloo's collectives until their Work
// lets go of it, the NKI simulator's arrays, AOTInductor's CPU code): under
// NEURON_MEMORY_PROTECT=1 device memory stays accessible while one lives (runtime/ProtectedMemory.h).
struct AliasHold {
  explicit AliasHold(const c10::Storage& s) : storage(s) {}
  c10::Storage storage;
  rt::HostAccessWindow window;
};

}  // namespace

at::Tensor tensor_over(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), like.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(
      like.sizes(), like.strides(), like.storage_offset());
  if (like.is_conj()) t._set_conj(true);
  if (like.is_neg()) t._set_neg(true);
  return t;
}

void carry_requires_grad(const at::Tensor& from, at::Tensor& to) {
  // `to` is a fresh leaf made by this layer, so the flag is set on it directly.
  if (from.requires_grad()) to.set_requires_grad(true);
}

bool same_geometry(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes().equals(b.sizes()) && a.strides().equals(b.strides()) &&
         a.storage_offset() == b.storage_offset();
}

at::Tensor make_neuron_tensor(c10::Storage storage, const at::Tensor& like) {
  return tensor_over(std::move(storage), c10::DispatchKey::PrivateUse1, like);
}

at::Tensor cpu_metadata_stand_in(const at::Tensor& t) {
  if (!t.defined()) return t;
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), t.storage().sym_nbytes(),
      c10::DataPtr(nullptr, c10::Device(c10::kCPU)), /*allocator=*/nullptr, /*resizable=*/false));
  auto cpu = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  cpu.unsafeGetTensorImpl()->set_sizes_and_strides(t.sym_sizes(), t.sym_strides(),
                                                   t.sym_storage_offset());
  // A fresh stand-in is a leaf, so requires_grad can be set on it directly.
  if (t.requires_grad() && cpu.is_floating_point()) cpu.requires_grad_(true);
  return cpu;
}

AliasSession::AliasSession(c10::DeviceIndex device) : device_(device), scope_(device) {
  require_host_access("running a CPU kernel on neuron memory");
}

at::Tensor cpu_alias_keeping_storage(const at::Tensor& neuron) {
  TORCH_CHECK(neuron.defined() && neuron.device().type() == c10::DeviceType::PrivateUse1,
              "cpu_alias expects a neuron tensor, got ",
              neuron.defined() ? neuron.device().str() : std::string("an undefined tensor"));
  TORCH_CHECK(neuron.layout() == c10::kStrided && neuron.has_storage(),
              "cpu_alias supports strided tensors only, got layout ", neuron.layout());
  require_host_access("a CPU alias of a neuron tensor");
  const c10::Storage& storage = neuron.storage();
  auto* owner = new AliasHold(storage);
  c10::DataPtr data(
      const_cast<void*>(storage.data()), owner,
      [](void* ctx) { delete static_cast<AliasHold*>(ctx); }, c10::Device(c10::kCPU));
  c10::Storage cpu_storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), storage.nbytes(), std::move(data),
      /*allocator=*/nullptr, /*resizable=*/false));
  return tensor_over(std::move(cpu_storage), c10::DispatchKey::CPU, neuron);
}

at::Tensor AliasSession::to_cpu(const at::Tensor& neuron) {
  if (!neuron.defined()) return neuron;
  // A native kernel hands every tensor argument here: one from another device (a CPU weight
  // beside a neuron input) is refused as CUDA's kernels refuse it, never read as neuron memory.
  TORCH_CHECK(neuron.device().type() == c10::DeviceType::PrivateUse1,
              "Expected all tensors to be on the same device, but found at least two devices, ",
              neuron_device(device_), " and ", neuron.device(), "!");
  if (is_sparse_layout(neuron)) {
    for (const auto& p : sparse_) {
      if (p.neuron.unsafeGetTensorImpl() == neuron.unsafeGetTensorImpl()) return p.cpu;
    }
    at::Tensor cpu = rebuild_sparse(neuron, c10::Device(c10::kCPU),
                                    [this](const at::Tensor& m) { return to_cpu(m); });
    carry_requires_grad(neuron, cpu);
    sparse_.push_back({neuron, cpu});
    return cpu;
  }
  TORCH_CHECK(
      neuron.layout() == c10::kStrided && neuron.has_storage(), "neuron supports strided tensors "
      "only, got a tensor with layout ", neuron.layout());
  // One tensor passed twice (`x.logical_and_(y)` runs as logical_and.out(x, y, out=x)) gets one
  // alias: kernels tell in-place from out= by tensor identity, and an in-place op must raise
  // where its result would need a resize, as on CPU.
  for (const auto& p : tensors_) {
    if (p.neuron.unsafeGetTensorImpl() == neuron.unsafeGetTensorImpl()) return p.cpu;
  }
  const c10::Storage& storage = neuron.storage();
  c10::Storage cpu_storage;
  for (const auto& p : storages_) {
    if (p.neuron.unsafeGetStorageImpl() == storage.unsafeGetStorageImpl()) cpu_storage = p.cpu;
  }
  if (!cpu_storage) {
    // Non-owning: the neuron storage keeps the memory alive for the whole session. The kernel
    // allocator makes a resize of the alias (out= ops) draw from neuron memory.
    void* data = const_cast<void*>(storage.data());
    cpu_storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
        c10::DataPtr(data, c10::Device(c10::kCPU)), kernel_cpu_allocator(),
        storage.resizable()));
    storages_.push_back({storage, cpu_storage, data, true});
  }
  at::Tensor cpu = tensor_over(cpu_storage, c10::DispatchKey::CPU, neuron);
  carry_requires_grad(neuron, cpu);
  tensors_.push_back({neuron, cpu});
  return cpu;
}

c10::Storage AliasSession::adopt_storage(const c10::Storage& cpu) {
  c10::StorageImpl* impl = cpu.unsafeGetStorageImpl();
  const std::size_t nbytes = impl->nbytes();
  const c10::DataPtr& dp = impl->data_ptr();
  c10::DataPtr owned;
  if (dp.get() == nullptr) {
    owned = c10::DataPtr(nullptr, neuron_device(device_));
  } else if (dp.get_deleter() == &NeuronCachingAllocator::free_block &&
             neuron_allocator().device_of(dp.get()) == device_) {
    // Already neuron memory (allocated in the kernel scope): take it over, no copy.
    owned = impl->set_data_ptr(c10::DataPtr());
    owned.unsafe_set_device(neuron_device(device_));
  } else {
    // Memory the kernel did not allocate through us (a constant, a thread-pool worker's
    // buffer): copy it onto the device.
    owned = neuron_allocator().allocate_on(device_, nbytes, neuron_device(device_));
    rt::memcpy(owned.get(), dp.get(), nbytes);
  }
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, std::move(owned), &neuron_allocator(),
      /*resizable=*/true));
}

at::Tensor AliasSession::to_neuron(const at::Tensor& cpu) {
  if (!cpu.defined() || cpu.device().type() != c10::kCPU) return cpu;
  for (const auto& p : tensors_) {
    if (p.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return p.neuron;
  }
  if (is_sparse_layout(cpu)) {
    for (const auto& p : sparse_) {
      if (p.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return p.neuron;
    }
    at::Tensor neuron = rebuild_sparse(cpu, neuron_device(device_),
                                       [this](const at::Tensor& m) { return to_neuron(m); });
    sparse_.push_back({neuron, cpu});
    return neuron;
  }
  TORCH_CHECK(
      cpu.layout() == c10::kStrided && cpu.has_storage(), "neuron supports strided tensors "
      "only; the CPU kernel returned layout ", cpu.layout());
  c10::StorageImpl* impl = cpu.storage().unsafeGetStorageImpl();
  for (const auto& p : storages_) {
    if (p.cpu.unsafeGetStorageImpl() == impl) return make_neuron_tensor(p.neuron, cpu);
  }
  // A fresh result. Remember it, so that several results over one buffer share one storage.
  c10::Storage cpu_storage = cpu.storage();
  c10::Storage neuron = adopt_storage(cpu_storage);
  storages_.push_back({neuron, cpu_storage, nullptr, false});
  return make_neuron_tensor(neuron, cpu);
}

void AliasSession::sync_back() {
  for (auto& p : storages_) {
    if (!p.is_argument) continue;
    c10::StorageImpl* cpu = p.cpu.unsafeGetStorageImpl();
    if (cpu->data() != p.original_data) {
      // An out= kernel resized the argument: its new buffer becomes the neuron storage's.
      c10::Storage fresh = adopt_storage(p.cpu);
      c10::StorageImpl* n = p.neuron.unsafeGetStorageImpl();
      n->set_data_ptr_noswap(fresh.unsafeGetStorageImpl()->set_data_ptr(c10::DataPtr()));
      n->set_nbytes(fresh.nbytes());
      p.original_data = n->data();
    } else if (cpu->nbytes() != p.neuron.nbytes()) {
      p.neuron.unsafeGetStorageImpl()->set_nbytes(cpu->nbytes());
    }
  }
  for (auto& t : tensors_) {
    if (t.cpu.storage().unsafeGetStorageImpl() != t.neuron.storage().unsafeGetStorageImpl()) {
      // The kernel re-pointed an argument at another storage (set_-style out= handling).
      c10::StorageImpl* target = t.cpu.storage().unsafeGetStorageImpl();
      for (const auto& p : storages_) {
        if (p.cpu.unsafeGetStorageImpl() == target) {
          if (p.neuron.unsafeGetStorageImpl() != t.neuron.storage().unsafeGetStorageImpl()) {
            t.neuron.unsafeGetTensorImpl()->set_storage_keep_dtype(p.neuron);
          }
          break;
        }
      }
    }
    if (!same_geometry(t.cpu, t.neuron)) {
      t.neuron.unsafeGetTensorImpl()->set_sizes_and_strides(
          t.cpu.sizes(), t.cpu.strides(), t.cpu.storage_offset());
    }
    // Some out= kernels hand back their result as a conjugate view of the buffer they wrote
    // (linalg_lu_solve with left=False sets the out tensor's conj bit on the CPU).
    if (t.cpu.is_conj() != t.neuron.is_conj()) t.neuron._set_conj(t.cpu.is_conj());
    if (t.cpu.is_neg() != t.neuron.is_neg()) t.neuron._set_neg(t.cpu.is_neg());
  }
  // In-place sparse kernels (add_, coalescing, resizes) give the CPU sparse tensor new members
  // or metadata. Indexed, not iterated: adopting a new member may add pairs.
  for (std::size_t i = 0; i < sparse_.size(); ++i) {
    const TensorPair p = sparse_[i];
    assign_sparse(p.neuron, p.cpu, [this](const at::Tensor& m) { return to_neuron(m); });
  }
}

}  // namespace torchneuron
