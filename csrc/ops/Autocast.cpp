// torch.autocast("neuron"): the cast policy of every op that has one, for AutocastPrivateUse1.
//
// This file is the one place neuron's autocast op lists live. They are CUDA's: ATen keeps the
// lists CUDA registers in shared macros (AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, ...,
// in ATen/autocast_mode.h) so that other backends can register exactly the same ones. In short:
//   lower_precision_fp  matmul, linear, conv, bmm, baddbmm, SDPA, RNN cells: run in the autocast
//                       dtype (bfloat16 by default on neuron, or float16)
//   fp32                softmax-adjacent pointwise (exp, log, pow, ...), norms, losses: float32
//   fp32_set_opt_dtype  softmax, log_softmax, sum, prod, cumsum, ...: float32 via dtype=
//   fp32_append_dtype   norm: float32 via the dtype overload
//   promote             multi-input ops (cat-like, addcmul, index_put, ...): widest input type
//   banned              binary_cross_entropy: unsafe in low precision; use the *_with_logits form
// Every other op runs unchanged (the fallthrough below). `torchneuron._C.ops.autocast_op_lists()`
// reads these same lists, so tests and docs never keep a copy.
#include "ops/Autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <map>
#include <string>
#include <vector>

namespace torchneuron {
namespace {

// The macros spell signatures with ATen's unqualified type names.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                   int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on neuron (as on CUDA). Many models use a sigmoid layer right before the "
              "binary cross entropy layer; combine the two with "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which are safe to autocast.");
}

}  // namespace

// Autocast for neuron leaves every op without a policy alone.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TN_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TN_LOWER_PRECISION_FP)
#undef TN_LOWER_PRECISION_FP

#define TN_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TN_FP32)
#undef TN_FP32

#define TN_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TN_FP32_SET_OPT_DTYPE)
#undef TN_FP32_SET_OPT_DTYPE

  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

#define TN_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TN_PROMOTE)
#undef TN_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_banned));
}

namespace {

using OpLists = std::map<std::string, std::vector<std::string>>;

// Adds "op" or "op.overload" (from a list entry `_(op)` or `_(op, overload)`) to `list`.
void add(OpLists& lists, const char* list, const char* op, const char* overload) {
  std::string name(op);
  if (overload[0] != '\0') name += std::string(".") + overload;
  lists[list].push_back(std::move(name));
}

}  // namespace

std::map<std::string, std::vector<std::string>> autocast_op_lists() {
  OpLists lists;
#define TN_LOWER(OP, ...) add(lists, "lower_precision_fp", #OP, "" #__VA_ARGS__);
  AT_FORALL_LOWER_PRECISION_FP(TN_LOWER)
#undef TN_LOWER
#define TN_FP32(OP, ...) add(lists, "fp32", #OP, "" #__VA_ARGS__);
  AT_FORALL_FP32(TN_FP32)
#undef TN_FP32
#define TN_SET_OPT(OP, ...) add(lists, "fp32_set_opt_dtype", #OP, "" #__VA_ARGS__);
  AT_FORALL_FP32_SET_OPT_DTYPE(TN_SET_OPT)
#undef TN_SET_OPT
#define TN_APPEND(FUNC, NAME, ...) lists["fp32_append_dtype"].push_back(NAME);
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TN_APPEND)
#undef TN_APPEND
#define TN_PROMOTE(OP, ...) add(lists, "promote", #OP, "" #__VA_ARGS__);
  AT_FORALL_PROMOTE(TN_PROMOTE)
#undef TN_PROMOTE
  lists["banned"].push_back("binary_cross_entropy");
  return lists;
}

}  // namespace torchneuron
