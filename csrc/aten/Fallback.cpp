// The boxed fallback: every ATen op without a neuron kernel of its own runs as the CPU kernel
// on CPU aliases of the neuron memory (see CpuAlias.h). It also enforces what the CUDA backend
// enforces in its generated wrappers: all tensors of one op on one device.
#include "aten/Fallback.h"

#include "aten/Accounting.h"
#include "aten/CallArguments.h"
#include "aten/CpuAlias.h"
#include "aten/DeferredOp.h"
#include "aten/Float64Gate.h"
#include "aten/GraphCapture.h"
#include "aten/IValueTensors.h"
#include "aten/OpWalk.h"
#include "aten/QuantizedRefusal.h"
#include "aten/SparseMembers.h"
#include "device/CurrentDevice.h"
#include "aten/Launch.h"
#include "device/NeuronGenerator.h"
#include "profiler/KernelActivity.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

namespace torchneuron {
namespace {

bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// Advanced indexing (x[idx], x[idx] = v): CUDA accepts index tensors on the CPU, and raises an
// IndexError when an index is on a device other than the CPU and the indexed tensor's (a CPU
// tensor indexed with device indices: check_indices_on_cpu_or_selfdevice); so does neuron.
// Argument 0 is the indexed tensor, argument 1 the indices.
bool is_advanced_indexing(const c10::OperatorName& name) {
  static constexpr std::string_view kOps[] = {
      "aten::index", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"};
  for (auto op : kOps) {
    if (name.name == op) return true;
  }
  return false;
}

// Finds the neuron device an op runs on and rejects tensors from other devices, with the
// messages CUDA gives ("Expected all tensors to be on the same device ...", and for advanced
// indexing "indices should be either on cpu or on the same device as the indexed tensor").
class DeviceCheck {
 public:
  explicit DeviceCheck(const c10::OperatorHandle& op)
      : op_(op), indexing_(is_advanced_indexing(op.operator_name())) {}

  // Before the tensors of argument `index`; `written`: an out= or in-place argument, which must
  // be on the op's device whatever its size (a 0-dim CPU tensor may be read as a scalar, never
  // written across devices).
  void argument(std::size_t index, bool written) {
    argument_ = index;
    written_ = written;
  }

  void visit(const at::Tensor& t) {
    if (!t.defined()) return;
    const c10::Device d = t.device();
    const bool indices = indexing_ && argument_ == 1;
    if (d.type() == c10::DeviceType::PrivateUse1) {
      if (indices && indexed_.has_value() && *indexed_ != d) index_mismatch(*indexed_);
      if (device_ < 0) {
        device_ = d.index();
      } else if (d.index() != device_) {
        mismatch(c10::Device(c10::DeviceType::PrivateUse1, device_), d);
      }
      if (indices) neuron_index_ = true;
    } else if (d.type() == c10::kCPU) {
      // Zero-dim CPU tensors are scalars, which CUDA kernels accept too; advanced indexing takes
      // its indices (and values) from the CPU as well, not the indexed tensor.
      if (written_ || (t.dim() != 0 && !(indexing_ && argument_ >= 1))) cpu_tensor_ = true;
    }
    if (indexing_ && argument_ == 0) indexed_ = d;
  }

  void visit_device_arg(const c10::Device& d) {
    if (d.type() == c10::DeviceType::PrivateUse1 && device_arg_ < 0) {
      device_arg_ = d.has_index() ? d.index() : current_device();
    }
  }

  c10::DeviceIndex finish() {
    const c10::DeviceIndex device = device_ >= 0 ? device_
                                    : device_arg_ >= 0 ? device_arg_
                                                       : current_device();
    if (indexed_.has_value() && indexed_->is_cpu() && neuron_index_) index_mismatch(*indexed_);
    if (cpu_tensor_ && device_ >= 0) {
      mismatch(c10::Device(c10::DeviceType::PrivateUse1, device_), c10::Device(c10::kCPU));
    }
    check_device(device);
    return device;
  }

 private:
  [[noreturn]] void mismatch(const c10::Device& a, const c10::Device& b) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                "devices, ", a, " and ", b, "! (in ", op_.operator_name(), ")");
  }
  [[noreturn]] void index_mismatch(const c10::Device& indexed) {
    TORCH_CHECK_INDEX(false, "indices should be either on ", c10::kCPU,
                      " or on the same device as the indexed tensor (", indexed, ")");
  }

  const c10::OperatorHandle& op_;
  const bool indexing_;
  std::size_t argument_ = 0;
  bool written_ = false;
  std::optional<c10::Device> indexed_;  // advanced indexing: the indexed tensor's device
  bool neuron_index_ = false;
  c10::DeviceIndex device_ = -1;
  c10::DeviceIndex device_arg_ = -1;
  bool cpu_tensor_ = false;
};

// A `dtype=` argument (ScalarType or ScalarType?) that asks for float64 arithmetic:
// sum(x, dtype=torch.float64) computes in float64 although no operand is float64.
bool asks_float64(const c10::Argument& arg, const c10::IValue& v) {
  if (!v.isInt()) return false;
  c10::TypePtr type = arg.real_type();  // type() says int: a ScalarType travels as one
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  return type->kind() == c10::TypeKind::ScalarTypeType &&
         is_float64_family(static_cast<c10::ScalarType>(v.toInt()));
}

bool is_optional_generator(const c10::Argument& arg) {
  const auto& type = arg.type();
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto opt = type->cast<c10::OptionalType>()) {
    return opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
  }
  return false;
}

c10::IValue to_cpu_aliases(const c10::IValue& v, AliasSession& session) {
  return map_tensors(v, [&](const at::Tensor& t) { return is_neuron(t) ? session.to_cpu(t) : t; });
}

// A quantized CPU result (quantize_per_tensor of a neuron tensor) would become a neuron tensor of
// a quantized dtype without its quantizer: refused by the op's name instead.
c10::IValue to_neuron_results(const c10::IValue& v, AliasSession& session,
                              const c10::OperatorName& op) {
  return map_tensors(v, [&](const at::Tensor& t) {
    if (t.is_quantized()) refuse_quantized(op);
    return session.to_neuron(t);
  });
}

// Runs the op on the calling thread (after queued work: the launch decision said inline, or its
// CPU aliases settle the device) and leaves its neuron results on the stack. A signature's first
// call is confirmed against its meta answer (`check`) while the call's CPU aliases still live:
// which results are arguments, views or fresh memory is read through them.
void run_now(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
             c10::DeviceIndex device, RecipeCheck* check) {
  const auto& schema = op.schema();
  const std::size_t num_args = schema.arguments().size();
  const std::size_t begin = stack->size() - num_args;
  profiler::KernelActivityScope activity(schema.name(), device);  // torch.profiler's device row
  if (activity.active()) activity.inputs(&(*stack)[begin], num_args);
  AliasSession session(device);
  run_cpu_kernel(op, ks, stack, session);

  const std::size_t num_returns = schema.returns().size();
  const std::size_t rbegin = stack->size() - num_returns;
  for (std::size_t i = 0; i < num_returns; ++i) {
    c10::IValue& v = (*stack)[rbegin + i];
    v = to_neuron_results(v, session, op.operator_name());
  }
  if (activity.active()) activity.outputs(&(*stack)[rbegin], num_returns);
  if (check != nullptr) check->confirm(*stack, num_returns);
}

std::int64_t neuron_bytes(const c10::IValue* values, std::size_t n) {
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for_each_tensor(values[i], [&](const at::Tensor& t) {
      if (is_neuron(t)) bytes += static_cast<std::int64_t>(t.numel() * t.itemsize());
    });
  }
  return bytes;
}

// A call a Trainium runtime runs on the host, while the readiness accounting is on: it runs now,
// as the host would run it there (after the device's queued work, which its operands need), and
// is counted with the bytes that would cross the host link each way and its CPU time.
void run_host_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                       torch::jit::Stack* stack, c10::DeviceIndex device, const char* reason) {
  const std::size_t num_args = op.schema().arguments().size();
  const std::int64_t to_host = neuron_bytes(&(*stack)[stack->size() - num_args], num_args);
  launch::settle();
  const auto start = std::chrono::steady_clock::now();
  run_now(op, ks, stack, device, nullptr);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start).count();
  const std::size_t num_returns = op.schema().returns().size();
  accounting::host_fallback(op, reason, to_host,
                            neuron_bytes(&(*stack)[stack->size() - num_returns], num_returns), ns);
}

}  // namespace

void run_cpu_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                    torch::jit::Stack* stack, AliasSession& session) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const std::size_t num_args = arguments.size();
  const std::size_t begin = stack->size() - num_args;
  const c10::DeviceIndex device = session.device();

  std::optional<GeneratorBridge> bridge;
  for (std::size_t i = 0; i < num_args; ++i) {
    c10::IValue& v = (*stack)[begin + i];
    if (v.isDevice()) {
      if (v.toDevice().type() == c10::DeviceType::PrivateUse1) v = c10::Device(c10::kCPU);
    } else if (v.isGenerator()) {
      const at::Generator& gen = v.toGenerator();
      if (is_neuron_generator(gen)) {
        bridge.emplace(gen);
        v = bridge->cpu();
      }
    } else if (v.isNone() && is_optional_generator(arguments[i])) {
      // Random ops on neuron draw from neuron's default generator: the device's own, or with
      // NEURON_RNG=cpu the CPU's default generator itself (device/NeuronGenerator.h).
      bridge.emplace(default_generator(device));
      v = bridge->cpu();
    } else {
      v = to_cpu_aliases(v, session);
    }
  }

  // Sparse neuron tensors run the CPU's sparse kernels (SparseNeuron -> SparseCPU, ...).
  const c10::DispatchKey cpu_key = cpu_counterpart(ks.highestPriorityTypeId());
  // Below autograd, as a CPU kernel runs under the CPU's autograd wrapper: the aliases carry
  // requires_grad (CpuAlias.cpp), and the ops a kernel calls on them must not record a graph or
  // refuse an in-place write to a leaf. The caller's autograd wrapper already excludes autograd
  // on its thread; a queued op runs on a worker, which needs it said here.
  const at::AutoDispatchBelowADInplaceOrView below_autograd;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
  } catch (const c10::NotImplementedError& e) {
    // "Could not run ... with arguments from the 'CPU' backend" means there is no CPU kernel
    // to run on neuron memory; other NotImplementedErrors (a dtype a kernel lacks) pass as is.
    if (std::string_view(e.what_without_backtrace()).rfind("Could not run", 0) != 0) throw;
    TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", op.operator_name(),
                                "' is not implemented for the neuron device (PyTorch has no ",
                                c10::toString(cpu_key), " kernel for it to run on neuron "
                                "memory).");
  }
  if (bridge) {
    // The generator's offset moves past this op's random values: one per output element.
    int64_t produced = 0;
    for (std::size_t i = stack->size() - schema.returns().size(); i < stack->size(); ++i) {
      for_each_tensor((*stack)[i], [&](const at::Tensor& t) { produced += t.numel(); });
    }
    bridge->advance_past(produced);
  }
  bridge.reset();
  session.sync_back();
}

void neuron_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto& arguments = schema.arguments();
  const std::size_t num_args = arguments.size();
  const std::size_t begin = stack->size() - num_args;

  // One walk over the arguments checks them (devices, float64, the largest operand for the
  // launch decision) and, when the op is sure to be queued (the device is busy, so its size does
  // not matter), reads them for the queue too (CallArguments.h): its signature and the worker's
  // snapshots. On an idle device a small op runs inline without paying for that, and a large one
  // is read again by defer_op.
  DeviceCheck check(op);
  bool has_float64 = false;
  std::size_t largest = 0;  // bytes of the largest neuron operand
  auto visit = [&](const at::Tensor& t) {
    check.visit(t);
    if (!is_neuron(t)) return;
    // Python scalars arrive as wrapped-number tensors of dtype double; they do not make
    // the op compute in float64 (type promotion keeps the tensor operands' dtype).
    has_float64 = has_float64 || (is_float64_family(t.scalar_type()) &&
                                  !t.unsafeGetTensorImpl()->is_wrapped_number());
    largest = std::max<std::size_t>(largest, t.numel() * t.itemsize());
  };
  std::optional<CallArguments> read;
  if (launch::queues_every_op() && may_defer(op, ks)) read.emplace(op);
  for (std::size_t i = 0; i < num_args; ++i) {
    const c10::IValue& v = (*stack)[begin + i];
    const c10::AliasInfo* alias = arguments[i].alias_info();
    check.argument(i, alias != nullptr && alias->isWrite());
    if (v.isDevice()) {
      check.visit_device_arg(v.toDevice());
    } else if (v.isInt()) {
      has_float64 = has_float64 || asks_float64(arguments[i], v);
    }
    if (read.has_value()) {
      if (read->read(v, visit)) continue;
      read.reset();  // the queue cannot take it: the check goes on alone
    }
    for_each_tensor(v, visit);
  }
  const c10::DeviceIndex device = check.finish();
  if (has_float64) check_float64(op.operator_name());
  // The readiness accounting (Accounting.h), at the launch decision: the call's signature, and
  // whether a Trainium runtime would run it on the host or wait for the device.
  const char* host_fallback = nullptr;
  if (accounting::enabled()) {
    accounting::op_call(op, &(*stack)[begin], num_args);
    host_fallback = accounting::host_fallback_reason(op, ks, has_float64);
    if (accounting::data_dependent_shape(op, &(*stack)[begin], num_args)) {
      accounting::sync(accounting::SyncCause::kDataDependentShape, schema.name(), 0);
    }
  }
  if (host_fallback != nullptr) {
    if (launch::capturing()) {
      launch::refuse_in_capture(schema.name(), std::string("a Trainium runtime runs it on the host (") +
                                                   host_fallback + "), reading its data there");
    }
    run_host_fallback(op, ks, stack, device, host_fallback);
    return;
  }
  // The launch decision (Launch.h): queued (or held) on the current stream when its results'
  // metadata can be known now (DeferredOp.h); otherwise it runs here, after the queued work. An
  // op outside ATen, queued only in a capture, learns its signature's recipe at every call.
  RecipeCheck recipe_check;
  const launch::Launch how = launch::decide(launch::Work::kOp, largest);
  if ((how != launch::Launch::kInline || queued_only_in_capture(op)) &&
      defer_op(op, ks, stack, device, how == launch::Launch::kHold, &recipe_check,
               read.has_value() ? &*read : nullptr)) {
    return;
  }
  if (launch::capturing()) launch::refuse_in_capture(schema.name(), capture_refusal());

  run_now(op, ks, stack, device, &recipe_check);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

// Ops with both a CPU kernel and a CompositeExplicitAutograd kernel (native_layer_norm,
// native_group_norm, addr, ...): for neuron the dispatcher picks the composite decomposition
// over the fallback, which rounds differently from the CPU's fused kernel (one ulp out of
// LayerNorm is enough to flip bfloat16 roundings downstream) and runs slower. The same holds
// for the functional form of every structured op (add.Tensor, mul.Tensor, ...): its
// CompositeExplicitAutogradNonFunctional kernel allocates the output with a dispatched
// empty_strided and then runs the out= op, twice the dispatch work of the CPU kernel. For sparse
// tensors that composite is wrong, not only slow: it allocates the output in the layout of the
// first operand (a CSR result for CSR @ dense), where the sparse CPU kernel returns a dense one.
// Registering the fallback as their neuron kernel runs the CPU kernel, as for every other op;
// the sparse keys get it where the CPU has a sparse kernel. The set is found in the dispatcher
// (it changes with the PyTorch version); called once, at import, after every static
// registration; returns the ops it routed (sparse ones prefixed with their neuron key).
std::vector<std::string> route_to_cpu_kernels() {
  struct Route {
    c10::DispatchKey cpu;
    c10::DispatchKey neuron;
    const char* prefix;
  };
  static constexpr Route kRoutes[] = {
      {c10::DispatchKey::CPU, c10::DispatchKey::PrivateUse1, ""},
      {c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1, "SparsePrivateUse1:"},
      {c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1,
       "SparseCsrPrivateUse1:"}};
  std::vector<std::string> routed;
  static std::vector<std::unique_ptr<torch::Library>> libraries;  // registrations live on
  for (const Route& route : kRoutes) {
    libraries.push_back(std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                         route.neuron, __FILE__, __LINE__));
    torch::Library& lib = *libraries.back();
    for_each_op_in("aten", [&](const c10::OperatorHandle& op, std::string short_name) {
      if (!op.hasKernelForDispatchKey(route.cpu) ||
          !(op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
            op.hasKernelForDispatchKey(
                c10::DispatchKey::CompositeExplicitAutogradNonFunctional)) ||
          op.hasKernelForDispatchKey(route.neuron)) {
        return;
      }
      lib.impl(short_name.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
      routed.push_back(route.prefix + std::move(short_name));
    });
  }
  return routed;
}

}  // namespace torchneuron
