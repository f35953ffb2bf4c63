#include "ops/DtypePolicy.h"

#include "runtime/ForkSafety.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace torchneuron {
namespace {

std::atomic<Float64Policy> g_policy{Float64Policy::kWarn};
std::mutex g_mutex;
[[maybe_unused]] const bool g_mutex_fork_safe = (rt::hold_across_fork(g_mutex), true);
// Replaced whole on reconfiguration, so readers need no lock past the pointer copy.
std::shared_ptr<const std::unordered_set<std::string>> g_exempt =
    std::make_shared<const std::unordered_set<std::string>>();
// Host-fallback calls per op ("aten::mul.Tensor"); an op is warned about on its first count.
std::unordered_map<std::string, std::int64_t> g_counts;

std::string full_name(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

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
  const Float64Policy policy = g_policy.load();
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_exempt->count(op.name) != 0) return;
    if (policy != Float64Policy::kError) first = ++g_counts[full_name(op)] == 1;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(policy != Float64Policy::kError, "neuron: ", op,
                              " got a float64 (or complex128) tensor or dtype, and Trainium has "
                              "no float64 arithmetic. Use float32, or set NEURON_FLOAT64=warn "
                              "(or allow) to compute it on the host as the CPU does.");
  if (first && policy == Float64Policy::kWarn) {
    TORCH_WARN("neuron: ", op, " computes in float64 (or complex128), which Trainium lacks: it ",
               "runs here as the CPU runs it, and on Trainium it would run on the host (a CPU ",
               "fallback, with copies both ways). Use float32 to keep it on the device; ",
               "NEURON_FLOAT64=allow silences this warning (once per op), =error refuses.");
  }
}

std::vector<std::pair<std::string, std::int64_t>> float64_host_fallback_counts() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return {g_counts.begin(), g_counts.end()};
}

void reset_float64_host_fallbacks() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_counts.clear();
}

}  // namespace torchneuron
