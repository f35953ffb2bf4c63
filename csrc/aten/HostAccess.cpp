#include "aten/HostAccess.h"

#include "aten/Launch.h"
#include "runtime/NeuronRuntime.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace torchneuron {
namespace {

// -1: not asked yet; 0 / 1: the runtime's answer (or a test's override).
std::atomic<int> g_addressable{-1};

}  // namespace

bool host_addressable() {
  int v = g_addressable.load(std::memory_order_relaxed);
  if (v < 0) {
    v = rt::capabilities().host_addressable_memory ? 1 : 0;
    g_addressable.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void require_host_access(const char* what) {
  TORCH_CHECK(host_addressable(), "neuron: ", what, " needs device memory that the CPU can "
              "address in place, and the neuron runtime '", rt::capabilities().name,
              "' does not declare it (rt::Capabilities::host_addressable_memory). This op has no "
              "kernel for that runtime yet.");
  launch::settle();  // the host touches device memory only once queued work is done
}

void override_host_addressable_for_testing(bool addressable) {
  g_addressable.store(addressable ? 1 : 0, std::memory_order_relaxed);
}

}  // namespace torchneuron
