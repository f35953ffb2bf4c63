// PrivateUse1 hooks: what ATen asks of a device backend that it cannot learn from the
// dispatcher (generators, pinned host memory, device of a pointer, storage resize).
#include "device/NeuronHooks.h"

#include "device/CurrentDevice.h"
#include "aten/Launch.h"
#include "runtime/ForkSafety.h"
#include "device/NeuronAllocator.h"
#include "device/NeuronGenerator.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstdlib>
#include <mutex>
#include <unordered_set>

namespace torchneuron {
namespace {

// Page-locked host memory for fast, asynchronous host<->device copies on real hardware; on the
// software NeuronCore it is aligned host memory that the allocator tracks so is_pinned() works.
class PinnedMemoryAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t nbytes) override {
    if (nbytes == 0) return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    void* p = std::aligned_alloc(64, (nbytes + 63) / 64 * 64);
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr, "neuron: cannot pin ", nbytes,
                     " bytes of host memory");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pinned_.insert(p);
    }
    return c10::DataPtr(p, p, &release, c10::Device(c10::kCPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    rt::memcpy(dest, src, count);
  }

  bool contains(const void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    return pinned_.count(const_cast<void*>(p)) != 0;
  }

  static void release(void* p) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pinned_.erase(p);
    }
    std::free(p);
  }

 private:
  static std::mutex mutex_;
  static const bool fork_safe_;  // a fork waits for mutex_ (see runtime/ForkSafety.h)
  static std::unordered_set<void*> pinned_;
};

std::mutex PinnedMemoryAllocator::mutex_;
std::unordered_set<void*> PinnedMemoryAllocator::pinned_;
const bool PinnedMemoryAllocator::fork_safe_ = (rt::hold_across_fork(mutex_), true);

PinnedMemoryAllocator& pinned_allocator() {
  static PinnedMemoryAllocator instance;
  return instance;
}

struct NeuronHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return rt::device_count() > 0; }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return device_generator(device_index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const c10::DeviceIndex d = neuron_allocator().device_of(data);
    return at::Device(c10::DeviceType::PrivateUse1, d >= 0 ? d : current_device());
  }

  bool isPinnedPtr(const void* data) const override { return pinned_allocator().contains(data); }

  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < rt::device_count();
  }

  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(rt::device_count());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  // UntypedStorage.resize_() on a neuron storage.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    const c10::DeviceIndex device = impl->device().index();
    c10::DataPtr fresh = neuron_allocator().allocate_on(
        device, newsize, c10::Device(c10::DeviceType::PrivateUse1, device));
    const std::size_t keep = std::min(newsize, impl->nbytes());
    launch::settle();  // queued work may still use the old bytes
    if (keep > 0) rt::memcpy(fresh.get(), impl->data(), keep);
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

}  // namespace

void register_hooks() {
  static NeuronHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
}

}  // namespace torchneuron
