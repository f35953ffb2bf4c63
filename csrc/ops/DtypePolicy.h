// Trainium has no float64 arithmetic. What a neuron op does with float64 (and complex128)
// operands is a policy, set from Python (torchneuron/ops/dtype_policy.py, NEURON_FLOAT64):
// `error` raises naming the op and the dtype; `allow` computes as the CPU does. Ops that only
// move or fill bits (copies, views, concatenation, indexing) are exempt: storing float64 is fine.
#pragma once

#include "aten/Float64Gate.h"

#include <string>
#include <vector>

namespace torchneuron {

enum class Float64Policy { kError = 0, kAllow = 1 };

void set_float64_policy(Float64Policy policy, const std::vector<std::string>& exempt_ops);
Float64Policy float64_policy();
// Raises for a non-exempt op under the `error` policy; installed as the fallback's float64 check
// (csrc/aten/Float64Gate.h).
void enforce_float64_policy(const c10::OperatorName& op);

}  // namespace torchneuron
