#include "device/SharedStorage.h"

#include "device/CurrentDevice.h"
#include "aten/Launch.h"
#include "device/NeuronAllocator.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <mutex>
#include <vector>

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

// Blocks this process allocated and let go of while another process still maps them: they stay
// in this process's statistics (and its HBM), as CUDA keeps a sent block in the sender's
// allocator until the receivers release it, until collect_released() finds them free.
std::mutex g_pending_mutex;
std::vector<SharedBlock*> g_pending;

void free_owned(SharedBlock* b) {
  rt::hbm_free_shared(b->device, b->block, b->bytes);
  neuron_allocator().count_shared(b->device, b->bytes, /*allocated=*/false);
  delete b;
}

void release_shared(void* ctx) {
  auto* b = static_cast<SharedBlock*>(ctx);
  if (!b->owner) {
    rt::hbm_unmap_shared(b->block, b->bytes);
    delete b;
  } else if (rt::hbm_shared_elsewhere(b->block)) {
    std::lock_guard<std::mutex> lock(g_pending_mutex);
    g_pending.push_back(b);
  } else {
    free_owned(b);
  }
  collect_released();
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

std::size_t collect_released() {
  std::vector<SharedBlock*> done;
  {
    std::lock_guard<std::mutex> lock(g_pending_mutex);
    auto released = std::partition(g_pending.begin(), g_pending.end(), [](SharedBlock* b) {
      return rt::hbm_shared_elsewhere(b->block);
    });
    done.assign(released, g_pending.end());
    g_pending.erase(released, g_pending.end());
  }
  for (SharedBlock* b : done) free_owned(b);  // outside the lock: frees take the allocator's
  return done.size();
}

int share_storage(const c10::Storage& storage) {
  collect_released();
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
  launch::settle();  // queued work may still write the bytes that move
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
  auto* b = new SharedBlock{device, rt::hbm_map_shared(fd, nbytes), nbytes, /*owner=*/false};
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
