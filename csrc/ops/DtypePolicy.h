// Trainium has no float64 arithmetic. What a neuron op does with float64 (and complex128)
// operands is a policy, set from Python (torchneuron/ops/dtype_policy.py, NEURON_FLOAT64):
// `warn` (the default) computes as the CPU does, a host fallback as AWS's TorchNeuron runs it, and
// warns once per op per process; `error` raises naming the op and the dtype; `allow` computes
// without a warning. Ops that only move or fill bits (copies, views, concatenation, indexing) are
// exempt: storing float64 is fine. Every host-fallback call is counted per op, for the readiness
// accounting.
#pragma once

#include "aten/Float64Gate.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron {

enum class Float64Policy { kError = 0, kAllow = 1, kWarn = 2 };

void set_float64_policy(Float64Policy policy, const std::vector<std::string>& exempt_ops);
Float64Policy float64_policy();
// Raises for a non-exempt op under the `error` policy; counts it (and warns on its first call
// under `warn`) otherwise. Installed as the fallback's float64 check (csrc/aten/Float64Gate.h).
void enforce_float64_policy(const c10::OperatorName& op);

// ("aten::mul.Tensor", calls) for every op that computed in float64 on the host.
std::vector<std::pair<std::string, std::int64_t>> float64_host_fallback_counts();
// Clears the counts and the ops already warned about.
void reset_float64_host_fallbacks();

}  // namespace torchneuron
