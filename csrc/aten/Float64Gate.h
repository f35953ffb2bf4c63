// Trainium has no float64 arithmetic. The kernels of this layer only ask two things about it:
// whether an operand's dtype is of the float64 family (such operands never take a native fast
// path), and, in the fallback, whether the op may compute with it. The answer to the second is
// the ops layer's policy (csrc/ops/DtypePolicy.h, NEURON_FLOAT64), which installs its check
// here, so that this layer needs nothing from the one above it.
#pragma once

#include <ATen/core/operator_name.h>
#include <c10/core/ScalarType.h>

namespace torchneuron {

inline bool is_float64_family(c10::ScalarType t) {
  return t == c10::ScalarType::Double || t == c10::ScalarType::ComplexDouble;
}

// A dtype a native fast path may compute in; float64 goes to the fallback, which applies the
// policy.
inline bool fast_path_dtype(c10::ScalarType t) { return !is_float64_family(t); }

// Raises for an op the policy refuses float64 to.
using Float64Check = void (*)(const c10::OperatorName& op);
void install_float64_check(Float64Check check);
// Called by the fallback for an op with a float64 operand; no-op until a policy is installed.
void check_float64(const c10::OperatorName& op);

}  // namespace torchneuron
