// The few ATen kernels that cannot go through the boxed fallback: they create neuron memory,
// change a tensor's metadata in place, or move bytes across the host/device boundary.
#include "aten/CpuStubs.h"  // first: before any ATen header
#include "aten/Accounting.h"
#include "aten/CpuAlias.h"
#include "aten/Float64Gate.h"
#include "aten/HostAccess.h"
#include "aten/native/FastPath.h"
#include "device/CurrentDevice.h"
#include "aten/Launch.h"
#include "device/NeuronAllocator.h"
#include "profiler/KernelActivity.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Copy.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/_reshape_alias_cpu_dispatch.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/resize_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/view_cpu_dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

const c10::DispatchKeySet kNeuronKeys(c10::DispatchKey::PrivateUse1);

c10::Device resolve_device(std::optional<c10::Device> device) {
  c10::Device d = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "neuron kernel called for ", d);
  if (!d.has_index()) d = c10::Device(d.type(), current_device());
  check_device(d.index());
  return d;
}

void check_layout(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided,
              "neuron supports strided tensors only, got layout ", *layout);
  TORCH_CHECK(!pin_memory.value_or(false), "only CPU tensors can be pinned; this is a neuron "
              "tensor");
}

// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (the default): new
// memory holds NaN (floating/complex) or the integer maximum, as the CPU's and CUDA's empty do.
at::Tensor fill_if_deterministic(at::Tensor t) {
  auto& ctx = at::globalContext();
  if (C10_UNLIKELY(ctx.deterministicAlgorithms() && ctx.deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout,
                               std::optional<c10::Device> device, std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  check_layout(layout, pin_memory);
  c10::DeviceGuard guard(resolve_device(device));
  return fill_if_deterministic(at::detail::empty_generic(
      size, &neuron_allocator(), kNeuronKeys, c10::dtype_or_default(dtype), memory_format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  check_layout(layout, pin_memory);
  c10::DeviceGuard guard(resolve_device(device));
  return fill_if_deterministic(at::detail::empty_strided_generic(
      size, stride, &neuron_allocator(), kNeuronKeys, c10::dtype_or_default(dtype)));
}

}  // namespace

at::Tensor new_device_tensor(c10::IntArrayRef size, c10::IntArrayRef stride,
                             c10::ScalarType dtype, c10::DeviceIndex device) {
  if (device == current_device()) {  // no guard to set and restore (the common case)
    return fill_if_deterministic(at::detail::empty_strided_generic(
        size, stride, &neuron_allocator(), kNeuronKeys, dtype));
  }
  return empty_strided(size, stride, dtype, std::nullopt,
                       c10::Device(c10::DeviceType::PrivateUse1, device), std::nullopt);
}

namespace {

// View kernels only build new metadata over the same storage; the CPU ones are device-blind.
at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::cpu::view_symint(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::cpu::_reshape_alias_symint(self, size, stride);
}

// Growth goes through the storage's allocator (ours) on the tensor's own device. Growing copies
// the old bytes and frees the old memory, which queued work may still use: a synchronization.
// Growing an empty storage (an out= argument made by at::empty({0}), as composites such as abs
// pass one) has nothing to copy or free, and a resize within the storage only changes this
// tensor's metadata (queued work holds its own): neither waits.
const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  if (!self.has_storage() || self.storage().nbytes() > 0) {
    const auto sizes = c10::asIntArrayRefSlowOpt(size);
    const bool fits = sizes.has_value() && self.has_storage() &&
                      at::detail::computeStorageNbytesContiguous(
                          *sizes, self.dtype().itemsize(), self.storage_offset()) <=
                          self.storage().nbytes();
    if (!fits) launch::settle();
  }
  return at::cpu::resize__symint(self, size, memory_format);
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device() == self.device(), "Expected a storage on ", self.device(),
              " to set a tensor on ", self.device(), ", but got a storage on ",
              source.device());
  return at::cpu::set__symint(self, std::move(source), std::move(offset), size, stride);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  const auto numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {c10::SymInt(numel)}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                     source.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, &neuron_allocator(), true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

// Every byte that crosses between host and device, or between two neuron devices, moves here
// (copy_ hands any copy that involves neuron to _copy_from before its own checks). Beyond a whole
// dense tensor moving as is, the CPU's copy_ runs on CPU aliases: its early exits (views of the
// same data), transposed copies, dtype conversions and overlap errors are then the CPU's own.
// The copy's row in a profiler trace, named as CUDA's copies are.
const char* memcpy_name(const at::Tensor& src, const at::Tensor& dst) {
  const bool from_device = src.device().type() == c10::DeviceType::PrivateUse1;
  const bool to_device = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (from_device && to_device) return "Memcpy DtoD (Device -> Device)";
  return to_device ? "Memcpy HtoD (Host -> Device)" : "Memcpy DtoH (Device -> Host)";
}

// A copy within one neuron device that the CPU's copy kernel may run on the neuron tensors
// themselves (host-addressable memory), skipping the CPU aliases (~half of a small strided copy's
// cost: a slice's backward, .contiguous() of an expanded gradient). Everything the CPU's copy_
// decides before its kernel stays with the alias path: views of the same memory (its early exit),
// conjugate and negative bits to resolve, complex to real (it warns), float64 (the policy).
bool copy_runs_on_device_tensors(const at::Tensor& src, const at::Tensor& dst) {
  return src.device() == dst.device() && src.device().type() == c10::DeviceType::PrivateUse1 &&
         host_addressable() && !src.is_conj() && !dst.is_conj() && !src.is_neg() &&
         !dst.is_neg() && (dst.is_complex() || !src.is_complex()) &&
         fast_path_dtype(src.scalar_type()) && fast_path_dtype(dst.scalar_type()) &&
         !src.storage().is_alias_of(dst.storage());
}

at::Tensor copy_now(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& on_device = dst.device().type() == c10::DeviceType::PrivateUse1 ? dst : self;
  profiler::KernelActivityScope activity(memcpy_name(self, dst), on_device.device().index());
  if (activity.active()) {
    activity.mark_memcpy();
    activity.inputs({&self});
    activity.outputs({&dst});
  }
  // The common case (a whole dense tensor moving as is) is a single memcpy.
  if (self.dtype() == dst.dtype() && self.sizes().equals(dst.sizes()) &&
      self.is_contiguous() && dst.is_contiguous() && self.is_conj() == dst.is_conj() &&
      self.is_neg() == dst.is_neg() && !self.storage().is_alias_of(dst.storage())) {
    launch::settle();  // the runtime's copy waits for queued work, then moves the bytes
    rt::memcpy(dst.mutable_data_ptr(), self.const_data_ptr(), self.nbytes());
    return dst;
  }
  TORCH_CHECK(self.layout() == c10::kStrided && dst.layout() == c10::kStrided,
              "neuron supports strided tensors only, got a copy from ", self.layout(), " to ",
              dst.layout());
  if (copy_runs_on_device_tensors(self, dst)) {
    launch::settle();
    launch::InlineScope in_place;
    // The CPU's copy_ past its early exits: the same iterator (its overlap checks included) and
    // the CPU's copy kernel, which converts dtypes as it copies.
    auto iter = at::TensorIteratorConfig()
                    .add_output(dst)
                    .add_const_input(self)
                    .resize_outputs(false)
                    .check_all_same_dtype(false)
                    .check_all_same_device(false)
                    .build();
    if (iter.numel() > 0) at::native::copy_stub(c10::kCPU, iter, non_blocking);
    return dst;
  }
  const c10::Device device = dst.device().type() == c10::DeviceType::PrivateUse1 ? dst.device()
                                                                                : self.device();
  AliasSession session(device.index());
  auto alias = [&](const at::Tensor& t) {
    return t.device().type() == c10::DeviceType::PrivateUse1 ? session.to_cpu(t) : t;
  };
  at::Tensor dst_cpu = alias(dst);
  at::_ops::copy_::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), dst_cpu, alias(self),
                              non_blocking);
  session.sync_back();
  return dst;
}

// Whether a copy may be queued (asynchronous execution): within one neuron device, or between
// pinned host memory and the device with non_blocking=True, as CUDA runs those on its stream.
// From or to pageable host memory a copy is synchronous, as on CUDA. A copy is queued only where
// the CPU's copy_ checks are known to pass at the call: the source broadcasts to the destination,
// the destination has no element written twice (the CPU's internal-overlap check: a strided view,
// such as the slice that a slice's backward fills, passes it), the two do not share memory, and
// no conversion warns (complex to real).
bool copy_can_queue(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (src.layout() != c10::kStrided || dst.layout() != c10::kStrided ||
      at::has_internal_overlap(dst) == at::MemOverlap::Yes ||
      !at::is_expandable_to(src.sizes(), dst.sizes()) ||
      (src.is_complex() && !dst.is_complex()) || src.is_conj() != dst.is_conj() ||
      src.is_neg() != dst.is_neg() || src.storage().is_alias_of(dst.storage())) {
    return false;
  }
  const bool src_on = src.device().type() == c10::DeviceType::PrivateUse1;
  const bool dst_on = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (src_on && dst_on) return src.device() == dst.device();
  const at::Tensor& host = src_on ? dst : src;
  return non_blocking && host.is_pinned();
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& on_device = dst.device().type() == c10::DeviceType::PrivateUse1 ? dst : self;
  const std::size_t bytes = std::max(self.nbytes(), dst.nbytes());
  if (launch::decide(launch::Work::kCopy, bytes) != launch::Launch::kInline &&
      copy_can_queue(self, dst, non_blocking)) {
    // Snapshots: the copy reads and writes the tensors as they are now.
    auto snapshot = [](const at::Tensor& t) {
      return t.device().type() == c10::DeviceType::PrivateUse1 ? make_neuron_tensor(t.storage(), t)
                                                               : t;
    };
    const c10::DeviceIndex device = on_device.device().index();
    launch::enqueue(launch::current_stream(device), memcpy_name(self, dst),
                  [src = snapshot(self), out = snapshot(dst), non_blocking] {
                    copy_now(src, out, non_blocking);
                  });
    return dst;
  }
  // A copy from the device to pageable host memory (or one that cannot queue) waits for the
  // device: a host synchronization on Trainium as here.
  if (accounting::enabled() && on_device.is_same(self) && dst.device().is_cpu()) {
    accounting::sync(accounting::SyncCause::kCopyToHost, "aten::copy_",
                     static_cast<std::int64_t>(dst.nbytes()));
  }
  return copy_now(self, dst, non_blocking);
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

// `.item()`: the element's bytes come to the host through the seam, after queued work.
c10::Scalar local_scalar_dense(const at::Tensor& self) {
  if (accounting::enabled()) {
    accounting::sync(accounting::SyncCause::kItem, "aten::_local_scalar_dense",
                     static_cast<std::int64_t>(self.itemsize()));
  }
  launch::settle();
  c10::Scalar r;
  AT_DISPATCH_V2(
      self.scalar_type(), "_local_scalar_dense_neuron",
      AT_WRAP([&] {
        scalar_t value;
        rt::memcpy(&value, self.const_data_ptr<scalar_t>(), sizeof(scalar_t));
        r = c10::Scalar(value);
      }),
      AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), c10::kComplexHalf, c10::kHalf, c10::kBool,
      c10::kBFloat16, AT_EXPAND(AT_FLOAT8_TYPES), AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return r;
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  neuron_allocator().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", record_stream);
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

}  // namespace torchneuron
