// C++ tests of the runtime seam alone (csrc/runtime/NeuronRuntime.h), built against nothing but
// the C++ standard library, as the seam may include nothing else. tests/runtime/test_seam.py
// compiles and runs this file; each failed check prints its line and the run exits 1.
#include "runtime/Execution.h"
#include "runtime/NeuronRuntime.h"
#include "cpp_check.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace rt = torchneuron::rt;

namespace {

template <typename Exception, typename Fn>
bool throws(Fn fn) {
  try {
    fn();
  } catch (const Exception&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

constexpr std::size_t kCapacity = 1 << 20;

int g_lazy_calls = 0;

void lazy_configuration() {
  // Unconfigured: a device query asks the configurator, and its error reaches the caller.
  rt::set_lazy_configurator([] {
    ++g_lazy_calls;
    throw std::invalid_argument("bad configuration");
  });
  CHECK(!rt::configured());
  CHECK(throws<std::invalid_argument>([] { rt::device_count(); }));
  CHECK(throws<std::invalid_argument>([] { rt::hbm_capacity(0); }));  // asked again
  CHECK(g_lazy_calls == 2);
  rt::set_lazy_configurator([] {
    ++g_lazy_calls;
    rt::configure(3, kCapacity);
  });
  CHECK(rt::device_count() == 3);
  CHECK(rt::device_count() == 3);
  CHECK(g_lazy_calls == 3);  // configured: never asked again
}

void configuration() {
  CHECK(throws<std::invalid_argument>([] { rt::configure(-1, kCapacity); }));
  CHECK(throws<std::invalid_argument>([] { rt::configure(65, kCapacity); }));
  rt::configure(2, kCapacity);
  CHECK(rt::configured());
  CHECK(rt::device_count() == 2);
  CHECK(rt::hbm_capacity(0) == kCapacity && rt::hbm_capacity(1) == kCapacity);
  CHECK(throws<std::out_of_range>([] { rt::hbm_capacity(2); }));
  CHECK(throws<std::out_of_range>([] { rt::hbm_capacity(-1); }));
}

void capabilities() {
  const rt::Capabilities caps = rt::capabilities();
  CHECK(caps.host_addressable_memory);  // the software NeuronCore's HBM is host memory
  CHECK(caps.name != nullptr && std::strlen(caps.name) > 0);
}

void allocation_and_capacity() {
  CHECK(rt::hbm_in_use(0) == 0);
  void* a = rt::hbm_malloc(0, 1000);
  CHECK(a != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % 64 == 0);  // HBM-like alignment
  CHECK(rt::hbm_in_use(0) == 1000);
  CHECK(rt::hbm_in_use(1) == 0);  // devices draw from their own capacity
  // More than is left: refused, nothing reserved.
  CHECK(rt::hbm_malloc(0, kCapacity) == nullptr);
  CHECK(rt::hbm_in_use(0) == 1000);
  // Exactly what is left: granted.
  void* b = rt::hbm_malloc(0, kCapacity - 1000);
  CHECK(b != nullptr);
  CHECK(rt::hbm_in_use(0) == kCapacity);
  CHECK(rt::hbm_malloc(0, 1) == nullptr);
  rt::hbm_free(0, b, kCapacity - 1000);
  rt::hbm_free(0, a, 1000);
  CHECK(rt::hbm_in_use(0) == 0);
  CHECK(throws<std::out_of_range>([] { rt::hbm_malloc(2, 16); }));
}

void concurrent_allocation_never_exceeds_capacity() {
  std::atomic<std::size_t> granted{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> blocks(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &granted, &blocks] {
      for (int i = 0; i < 200; ++i) {
        if (void* p = rt::hbm_malloc(1, 4096)) {
          blocks[t].push_back(p);
          granted += 4096;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(granted.load() == kCapacity);  // 800 asks of 4 KiB: exactly 256 fit in 1 MiB
  CHECK(rt::hbm_in_use(1) == kCapacity);
  for (auto& list : blocks) {
    for (void* p : list) rt::hbm_free(1, p, 4096);
  }
  CHECK(rt::hbm_in_use(1) == 0);
}

void copies() {
  void* dev = rt::hbm_malloc(0, 256);
  unsigned char host[256], back[256];
  for (int i = 0; i < 256; ++i) host[i] = static_cast<unsigned char>(i * 7);
  rt::memcpy(dev, host, sizeof host);  // host -> device
  std::memset(back, 0, sizeof back);
  rt::memcpy(back, dev, sizeof back);  // device -> host
  CHECK(std::memcmp(host, back, sizeof host) == 0);
  void* dev2 = rt::hbm_malloc(1, 256);
  rt::memcpy(dev2, dev, 256);  // device -> device
  std::memset(back, 0, sizeof back);
  rt::memcpy(back, dev2, sizeof back);
  CHECK(std::memcmp(host, back, sizeof host) == 0);
  rt::memcpy(nullptr, nullptr, 0);  // an empty copy touches nothing
  rt::hbm_free(1, dev2, 256);
  rt::hbm_free(0, dev, 256);
}

void clock_and_synchronize() {
  const std::int64_t t0 = rt::clock_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::int64_t t1 = rt::clock_ns();
  CHECK(t1 - t0 >= 5'000'000);
  CHECK(t1 - t0 < 5'000'000'000);  // nanoseconds, not some other unit
  std::int64_t last = rt::clock_ns();
  bool monotonic = true;
  for (int i = 0; i < 10000; ++i) {
    const std::int64_t now = rt::clock_ns();
    monotonic = monotonic && now >= last;
    last = now;
  }
  CHECK(monotonic);
  rt::synchronize_device(0);  // the one entry point (runtime/Execution.h)
  CHECK(throws<std::out_of_range>([] { rt::synchronize_device(-1); }));
}

void backing_memory() {
  const std::size_t total = rt::backing_memory_total();
  const std::size_t available = rt::backing_memory_available();
  CHECK(total > 0 && available > 0);
  CHECK(available <= total);
  // A device whose HBM would hold more than the host can back: the host decides, and says so.
  rt::configure(1, std::size_t(1) << 60);
  rt::MallocFailure why;
  CHECK(rt::hbm_malloc(0, total + (std::size_t(1) << 30), &why) == nullptr);
  CHECK(why.backing_exhausted);
  CHECK(why.backing_available > 0 && why.backing_available <= total);
  CHECK(rt::hbm_in_use(0) == 0);  // nothing stays reserved
  // Within what the host can back: granted as before.
  void* p = rt::hbm_malloc(0, std::size_t(4) << 20, &why);
  CHECK(p != nullptr);
  rt::hbm_free(0, p, std::size_t(4) << 20);
}

}  // namespace

int main() {
  lazy_configuration();
  configuration();
  capabilities();
  allocation_and_capacity();
  concurrent_allocation_never_exceeds_capacity();
  copies();
  clock_and_synchronize();
  backing_memory();
  return seam_test::report();
}
