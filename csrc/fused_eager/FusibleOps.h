// Fused eager's one fusion rule: which ops a chain may take, and as what. Pointwise ops are those
// PyTorch tags `pointwise` (functional, one tensor result, no random draws, arguments a chain can
// describe); a listed reduction may end a chain; an in-place or out= form of either joins as its
// functional op written back. The Python side asks the same rule (torchneuron/fused_eager/ops.py,
// through `_C.fused_eager.step_kind`).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torchneuron::fused_eager {

struct OpKind {
  bool fusible = false;
  bool reduction = false;
  bool in_place = false;                       // written into its first argument
  bool out = false;                            // written into its last argument, out=
  std::optional<c10::OperatorHandle> functional;  // the op the chain's step computes
  // Per argument of `functional`: a float given there is read by the fused kernel at each call
  // (a runtime scalar), not compiled in.
  std::vector<bool> runtime_scalar;
};

// The rule's lists, from Python: the reductions that may end a chain, as "aten::sum.default"
// (torchneuron/ops/op_lists.py), and the Scalar-typed arguments a fused kernel reads at each
// call, as ("aten::add.Tensor", "alpha") (torchneuron/fused_eager/runtime_scalars.py). Forgets
// what it decided before.
void configure_rule(const std::vector<std::string>& reductions,
                    const std::vector<std::pair<std::string, std::string>>& runtime_scalars);

// The rule's answer for `op`, decided once per op (entries are never removed while the lists
// stay the same).
const OpKind& kind_of(const c10::OperatorHandle& op);

// What `op` ("aten::add.Tensor", "aten::sum" or "aten::sum.default") may be as a step of a chain, which is a
// functional op: "pointwise", "reduction", or "" (it cannot be a step; in-place and out= forms
// join a chain as their functional op). Throws for an op the dispatcher does not know.
std::string step_kind(const std::string& qualified_name);

}  // namespace torchneuron::fused_eager
