// Native neuron kernels for the arithmetic a training loop calls most: add, sub, mul and div
// (functional, in-place and out=). Through the boxed fallback a 16-element add pays for CPU
// aliases of its arguments and the adoption of its result, ~40% over the CPU's own call
// (callgrind: 12,950 vs 7,560 instructions per `a + a`). Here the CPU backend's kernel (the same
// DispatchStub entry, asked for its CPU implementation) runs on a TensorIterator built over the
// neuron tensors themselves, whose memory is host memory on the software NeuronCore;
// TensorIterator allocates the result through the neuron allocator (empty_strided on neuron).
// The iterator borrows its operands, as the CPU's structured kernels build theirs (callgrind, in
// one process: ~10,000 vs the CPU's ~9,300 instructions per `a + a`).
//
// The CPU backend's TensorIterator converts operands of another dtype to the common dtype
// before its kernels run (it does so only when the common device is the CPU), and the kernels
// read every operand as that dtype. So the fast path takes operands that already have the result
// dtype, plus Python numbers converted here exactly as the CPU converts them; every other case
// (mixed dtypes, integer division, float64, reduced-precision with a Python number, whose CPU
// kernel reads the unconverted number) runs through the fallback, which handles all of them.
#include "aten/CpuStubs.h"  // first: before any ATen header
#include "aten/Fallback.h"
#include "aten/native/FastPath.h"
#include "profiler/KernelActivity.h"

#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/BinaryOps.h>
#include <c10/util/MaybeOwned.h>
#include <c10/util/TypeCast.h>
#include <torch/library.h>

#include <optional>
#include <string>

namespace torchneuron {
namespace {

enum class Arith { kAdd, kSub, kMul, kDiv };

bool is_python_number(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->is_wrapped_number();
}

// Type promotion's categories: a Python number only changes the result dtype when it is of a
// higher category than the tensor (bool < integer < floating < complex).
int promotion_category(c10::ScalarType t) {
  if (t == c10::kBool) return 0;
  if (c10::isIntegralType(t, /*includeBool=*/false)) return 1;
  if (c10::isFloatingType(t)) return 2;
  return 3;
}

// A Python number as a 0-dim CPU tensor of `dtype`, converted with the static_cast the CPU's
// copy kernel uses (what TensorIterator's `.to(common_dtype)` does on the CPU).
at::Tensor python_number_as(const at::Tensor& number, c10::ScalarType dtype) {
  at::Tensor out = at::detail::empty_cpu({}, dtype);
  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND(c10::kBool, dtype, "neuron_python_number_as", [&] {
    *out.mutable_data_ptr<scalar_t>() =
        c10::fetch_and_cast<scalar_t>(number.scalar_type(), number.const_data_ptr());
  });
  return out;
}

// Borrowed from the caller where they are used as given (the common case: no reference counts
// to touch on an op of a few floats), owned where a Python number was converted.
struct Operands {
  c10::MaybeOwned<at::Tensor> self;
  c10::MaybeOwned<at::Tensor> other;
  c10::ScalarType dtype;
};

// The operands as the CPU kernel can read them, or nullopt where the op must take the fallback.
std::optional<Operands> fast_operands(const at::Tensor& self, const at::Tensor& other,
                                      Arith op) {
  if (!self.defined() || !other.defined() || self.layout() != c10::kStrided ||
      other.layout() != c10::kStrided || !fast_path_now({&self, &other})) {
    return std::nullopt;
  }
  // Tensors (not Python numbers) on one neuron device; anything else, a CPU tensor written or
  // read across devices included, is for the fallback to accept or refuse.
  c10::DeviceIndex device = -1;
  for (const at::Tensor* t : {&self, &other}) {
    if (is_python_number(*t)) continue;
    if (t->device().type() != c10::DeviceType::PrivateUse1 ||
        (device >= 0 && t->device().index() != device)) {
      return std::nullopt;
    }
    device = t->device().index();
  }
  // Checked on the operands as given (a Python bool is still a bool here).
  if (op == Arith::kSub) at::native::sub_check(self, other);
  Operands ops{c10::MaybeOwned<at::Tensor>::borrowed(self),
               c10::MaybeOwned<at::Tensor>::borrowed(other), self.scalar_type()};
  const bool self_number = is_python_number(self);
  if (self_number != is_python_number(other)) {
    const at::Tensor& number = self_number ? self : other;
    ops.dtype = (self_number ? other : self).scalar_type();
    // The conversion below covers AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND(kBool)'s dtypes;
    // complex32 (experimental in PyTorch) takes the fallback.
    if (ops.dtype == c10::kComplexHalf) return std::nullopt;
    if (number.scalar_type() != ops.dtype) {
      if (promotion_category(number.scalar_type()) > promotion_category(ops.dtype) ||
          c10::isReducedFloatingType(ops.dtype)) {
        return std::nullopt;
      }
      (self_number ? ops.self : ops.other) =
          c10::MaybeOwned<at::Tensor>::owned(python_number_as(number, ops.dtype));
    }
  } else if (self.scalar_type() != other.scalar_type()) {
    return std::nullopt;
  }
  if (!fast_path_dtype(ops.dtype)) return std::nullopt;
  // True division promotes integers to the default float dtype: a conversion.
  if (op == Arith::kDiv && !(c10::isFloatingType(ops.dtype) || c10::isComplexType(ops.dtype))) {
    return std::nullopt;
  }
  return ops;
}

// Checks alpha and builds the iterator as the CPU's meta function does, then runs the CPU
// implementation of the stub.
at::Tensor run_cpu_stub(Arith op, at::Tensor out, const Operands& ops, const c10::Scalar& alpha) {
  if (op == Arith::kAdd || op == Arith::kSub) at::native::alpha_check(ops.dtype, alpha);
  static constexpr const char* kNames[] = {"aten::add", "aten::sub", "aten::mul", "aten::div"};
  const at::Tensor& self = *ops.self;
  const at::Tensor& other = *ops.other;
  const at::Tensor& on_device = self.is_privateuseone() ? self : other;
  profiler::KernelActivityScope activity(kNames[static_cast<int>(op)], on_device.device().index());
  launch::InlineScope in_place;  // the iterator's allocations and casts run here, in order
  // Two operands of one dense layout: the iterator would give the result that layout; allocated
  // here, without the dispatcher's empty_strided call the iterator would make.
  bool fresh_out = false;
  if (!out.defined() && !is_python_number(self) && !is_python_number(other) &&
      self.sizes().equals(other.sizes()) && self.strides().equals(other.strides()) &&
      self.is_non_overlapping_and_dense()) {
    out = new_device_tensor(self.sizes(), self.strides(), ops.dtype, on_device.device().index());
    fresh_out = true;
  }
  // TensorIterator's binary (float) op configuration, borrowing as the CPU's structured kernels
  // do: `out` and the operands outlive the iterator, so it takes no references (an undefined
  // `out` is allocated and owned by it). A result allocated just above cannot overlap anything,
  // so its overlap checks are skipped (the CPU's meta skips them for the same reason: its result
  // does not exist yet when it builds).
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(!fresh_out)
      .allow_cpu_scalars(true)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .promote_integer_inputs_to_float(op == Arith::kDiv)
      .add_output(out)
      .add_const_input(self)
      .add_const_input(other);
  at::TensorIterator iter;
  iter.build(config);
  switch (op) {
    case Arith::kAdd: at::native::add_stub(c10::kCPU, iter, alpha); break;
    case Arith::kSub: at::native::add_stub(c10::kCPU, iter, -alpha); break;  // as the CPU's sub
    case Arith::kMul: at::native::mul_stub(c10::kCPU, iter); break;
    case Arith::kDiv: at::native::div_true_stub(c10::kCPU, iter); break;
  }
  if (activity.active()) {
    activity.inputs({&self, &other});
    activity.outputs({&iter.output()});
  }
  return out.defined() ? std::move(out) : iter.output();
}

// One op in its three forms; name() is its ATen name, for the fallback.
template <Arith kOp>
struct Kernels {
  static std::string name() {
    switch (kOp) {
      case Arith::kAdd: return "aten::add";
      case Arith::kSub: return "aten::sub";
      case Arith::kMul: return "aten::mul";
      case Arith::kDiv: return "aten::div";
    }
    return "";
  }

  // The op through the fallback; add and sub take alpha, mul and div do not.
  template <typename... Out>
  static at::Tensor fallback(const std::string& op, const char* overload, const at::Tensor& self,
                             const at::Tensor& other, const c10::Scalar& alpha,
                             const Out&... out) {
    if constexpr (kOp == Arith::kAdd || kOp == Arith::kSub) {
      return call_through_fallback(op.c_str(), overload, self, other, alpha, out...);
    } else {
      return call_through_fallback(op.c_str(), overload, self, other, out...);
    }
  }

  static at::Tensor functional(const at::Tensor& self, const at::Tensor& other,
                               const c10::Scalar& alpha) {
    if (auto ops = fast_operands(self, other, kOp)) {
      return run_cpu_stub(kOp, at::Tensor(), *ops, alpha);
    }
    return fallback(name(), "Tensor", self, other, alpha);
  }

  static at::Tensor& inplace(at::Tensor& self, const at::Tensor& other,
                             const c10::Scalar& alpha) {
    auto ops = fast_operands(self, other, kOp);
    if (ops && ops->dtype == self.scalar_type()) {
      run_cpu_stub(kOp, self, *ops, alpha);
    } else {
      fallback(name() + "_", "Tensor", self, other, alpha);
    }
    return self;
  }

  static at::Tensor& out(const at::Tensor& self, const at::Tensor& other,
                         const c10::Scalar& alpha, at::Tensor& result) {
    auto ops = fast_operands(self, other, kOp);
    if (ops && result.defined() && ops->dtype == result.scalar_type() &&
        result.device() == (is_python_number(self) ? other : self).device()) {
      run_cpu_stub(kOp, result, *ops, alpha);
    } else {
      fallback(name(), "out", self, other, alpha, result);
    }
    return result;
  }

  // mul and div take no alpha.
  static at::Tensor functional_no_alpha(const at::Tensor& self, const at::Tensor& other) {
    return functional(self, other, 1);
  }
  static at::Tensor& inplace_no_alpha(at::Tensor& self, const at::Tensor& other) {
    return inplace(self, other, 1);
  }
  static at::Tensor& out_no_alpha(const at::Tensor& self, const at::Tensor& other,
                                  at::Tensor& result) {
    return out(self, other, 1, result);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using Add = Kernels<Arith::kAdd>;
  using Sub = Kernels<Arith::kSub>;
  using Mul = Kernels<Arith::kMul>;
  using Div = Kernels<Arith::kDiv>;
  m.impl("add.Tensor", Add::functional);
  m.impl("add_.Tensor", Add::inplace);
  m.impl("add.out", Add::out);
  m.impl("sub.Tensor", Sub::functional);
  m.impl("sub_.Tensor", Sub::inplace);
  m.impl("sub.out", Sub::out);
  m.impl("mul.Tensor", Mul::functional_no_alpha);
  m.impl("mul_.Tensor", Mul::inplace_no_alpha);
  m.impl("mul.out", Mul::out_no_alpha);
  m.impl("div.Tensor", Div::functional_no_alpha);
  m.impl("div_.Tensor", Div::inplace_no_alpha);
  m.impl("div.out", Div::out_no_alpha);
}

}  // namespace torchneuron
