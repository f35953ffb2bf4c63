// c10d hands a collective's reduce op to device kernels as a TorchScript object whose only
// Python-visible method is op(); the factor of PREMUL_SUM (NCCL's op, which FSDP2 uses to divide
// gradients by a custom factor, e.g. TorchTitan's 1.0) lives in a C++ supplement. This op reads
// it, so the neuron c10d backend can run PREMUL_SUM on gloo, which lacks it, as a SUM of scaled
// inputs (torchneuron/distributed/direct_calls.py).
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/library.h>

namespace {

double premul_sum_factor(const c10::intrusive_ptr<c10d::ReduceOp>& op) {
  TORCH_CHECK(op->op_ == c10d::ReduceOp::PREMUL_SUM,
              "premul_sum_factor: expected a PREMUL_SUM reduce op, got op ", int(op->op_));
  const auto* extra = dynamic_cast<const c10d::PreMulSumSupplement*>(op->supplement_.get());
  TORCH_CHECK(extra != nullptr, "premul_sum_factor: this PREMUL_SUM reduce op has no factor");
  if (extra->tensor_factor.defined()) {
    TORCH_CHECK(extra->tensor_factor.numel() == 1,
                "the neuron backend supports PREMUL_SUM with one factor; got a factor tensor of ",
                extra->tensor_factor.numel(), " elements");
    return extra->tensor_factor.item<double>();
  }
  return extra->double_factor;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("premul_sum_factor(__torch__.torch.classes.c10d.ReduceOp op) -> float",
        &premul_sum_factor);
}
