#include "ops/DtypePolicy.h"

#include "runtime/ForkSafety.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace torchneuron {
namespace {

std::atomic<Float64Policy> g_policy{Float64Policy::kError};
std::mutex g_mutex;
[[maybe_unused]] const bool g_mutex_fork_safe = (rt::hold_across_fork(g_mutex), true);
// Replaced whole on reconfiguration, so readers need no lock past the pointer copy.
std::shared_ptr<const std::unordered_set<std::string>> g_exempt =
    std::make_shared<const std::unordered_set<std::string>>();

}  // namespace

void set_float64_policy(Float64Policy policy, const std::vector<std::string>& exempt_ops) {
  auto exempt = std::make_shared<const std::unordered_set<std::string>>(
      exempt_ops.begin(), exempt_ops.end());
  std::lock_guard<std::mutex> lock(g_mutex);
  g_exempt = std::move(exempt);
  g_policy = policy;
}

Float64Policy float64_policy() { return g_policy; }

namespace {
// The fallback asks the policy through the gate from the moment the library loads.
[[maybe_unused]] const bool g_installed = (install_float64_check(&enforce_float64_policy), true);
}  // namespace

void enforce_float64_policy(const c10::OperatorName& op) {
  if (g_policy.load() == Float64Policy::kAllow) return;
  std::shared_ptr<const std::unordered_set<std::string>> exempt;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    exempt = g_exempt;
  }
  if (exempt->count(op.name) != 0) return;
  TORCH_CHECK_NOT_IMPLEMENTED(false, "neuron: ", op, " got a float64 (or complex128) tensor or "
                              "dtype, and Trainium has no float64 arithmetic. Use float32, or "
                              "set NEURON_FLOAT64=allow to compute in float64 as the CPU does.");
}

}  // namespace torchneuron
