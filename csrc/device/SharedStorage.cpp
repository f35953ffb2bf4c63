#include "device/SharedStorage.h"

#include "device/CurrentDevice.h"
#include "device/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>

#include <mutex>

namespace torchneuron {
namespace {

// The context of a DataPtr over shareable memory. `owner`: this process allocated it (and
// counts it in its statistics); otherwise it mapped another process's block.
struct SharedBlock {
  c10::DeviceIndex device;
  rt::SharedHbm block;
  std::size_t bytes;
  bool owner;
};

void release_shared(void* ctx) {
  auto* b = static_cast<SharedBlock*>(ctx);
  if (b->owner) {
    rt::hbm_free_shared(b->device, b->block, b->bytes);
    neuron_allocator().count_shared(b->device, b->bytes, /*allocated=*/false);
  } else {
    rt::hbm_unmap_shared(b->block.ptr, b->block.fd, b->bytes);
  }
  delete b;
}

const SharedBlock* shared_block(const c10::Storage& storage) {
  const c10::DataPtr& dp = storage.data_ptr();
  if (dp.get_deleter() != &release_shared) return nullptr;
  return static_cast<const SharedBlock*>(dp.get_context());
}

c10::DataPtr shared_data_ptr(SharedBlock* b) {
  return c10::DataPtr(b->block.ptr, b, &release_shared,
                      c10::Device(c10::DeviceType::PrivateUse1, b->device));
}

std::mutex g_share_mutex;  // two threads sending one storage move it once

}  // namespace

int share_storage(const c10::Storage& storage) {
  std::lock_guard<std::mutex> lock(g_share_mutex);
  if (const SharedBlock* b = shared_block(storage)) return b->block.fd;
  const c10::DeviceIndex device = storage.device().index();
  check_device(device);
  const std::size_t bytes = storage.nbytes();
  rt::MallocFailure why;
  rt::SharedHbm block = rt::hbm_malloc_shared(device, bytes, &why);
  if (block.ptr == nullptr) {
    // The caching allocator may hold the bytes in its cache: give them back and try again.
    neuron_allocator().emptyCache();
    block = rt::hbm_malloc_shared(device, bytes, &why);
  }
  TORCH_CHECK_WITH(OutOfMemoryError, block.ptr != nullptr, "neuron out of memory: sharing ",
                   bytes, " bytes with another process needs as much shareable device memory on ",
                   c10::Device(c10::DeviceType::PrivateUse1, device),
                   why.backing_exhausted ? " (the host cannot back it)" : "");
  if (bytes != 0) rt::memcpy(block.ptr, storage.data(), bytes);
  auto* b = new SharedBlock{device, block, bytes, /*owner=*/true};
  neuron_allocator().count_shared(device, bytes, /*allocated=*/true);
  // The old block goes back to the allocator when the swapped-out DataPtr dies here.
  c10::DataPtr old = storage.unsafeGetStorageImpl()->set_data_ptr(shared_data_ptr(b));
  storage.unsafeGetStorageImpl()->set_resizable(false);  // as CPU storages in shared memory
  return block.fd;
}

bool is_shared_storage(const c10::Storage& storage) { return shared_block(storage) != nullptr; }

at::Tensor open_shared_storage(int fd, std::size_t nbytes, c10::DeviceIndex device) {
  check_device(device);
  void* p = rt::hbm_map_shared(fd, nbytes);
  auto* b = new SharedBlock{device, rt::SharedHbm{p, fd}, nbytes, /*owner=*/false};
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), nbytes, shared_data_ptr(b), /*allocator=*/nullptr,
      /*resizable=*/false));
  at::Tensor t = at::empty({0}, at::TensorOptions()
                                    .dtype(at::kByte)
                                    .device(c10::Device(c10::DeviceType::PrivateUse1, device)));
  t.set_(storage, 0, {static_cast<int64_t>(nbytes)}, {1});
  return t;
}

}  // namespace torchneuron
