#include "aten/DeferredOp.h"

#include "aten/CallArguments.h"
#include "aten/CapturedCall.h"
#include "aten/CpuAlias.h"
#include "aten/Fallback.h"
#include "aten/GraphCapture.h"
#include "aten/IValueTensors.h"
#include "aten/Launch.h"
#include "device/NeuronAllocator.h"
#include "device/NeuronGenerator.h"
#include "profiler/KernelActivity.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/enum_tag.h>
#include <c10/core/GradMode.h>
#include <ATen/ops/copy_ops.h>
#include <ATen/ops/resize_ops.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace torchneuron {
namespace {

// Ops found not deferrable: their meta call failed this many times and never succeeded (no meta
// function, or one that needs data). A user's shape error fails it too, so one failure is not
// enough; a success clears the count.
constexpr int kMetaFailuresBeforeGivingUp = 3;
std::mutex g_failures_mutex;
std::unordered_map<const c10::FunctionSchema*, int>& meta_failures() {
  static auto* map = new std::unordered_map<const c10::FunctionSchema*, int>();
  return *map;
}

bool given_up(const c10::FunctionSchema* schema) {
  std::lock_guard<std::mutex> lock(g_failures_mutex);
  auto it = meta_failures().find(schema);
  return it != meta_failures().end() && it->second >= kMetaFailuresBeforeGivingUp;
}

void count_meta(const c10::FunctionSchema* schema, bool ok) {
  std::lock_guard<std::mutex> lock(g_failures_mutex);
  if (ok) {
    meta_failures().erase(schema);
  } else {
    ++meta_failures()[schema];
  }
}

bool is_tensor_like(c10::TypePtr type) {
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  if (type->kind() == c10::TypeKind::TensorType) return true;
  if (auto list = type->cast<c10::ListType>()) return is_tensor_like(list->getElementType());
  return false;
}

// The index of the op's Generator (or Generator?) argument, if it has one.
std::optional<std::size_t> generator_argument(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  for (std::size_t i = 0; i < args.size(); ++i) {
    c10::TypePtr type = args[i].type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) return i;
  }
  return std::nullopt;
}

bool is_aten(const c10::FunctionSchema& schema) { return schema.name().rfind("aten::", 0) == 0; }

// Whether the op can be queued at all, from its schema alone. An op outside ATen is taken at its
// schema's word, as functionalization and Inductor take it: what it writes is annotated
// (`Tensor(a!)`), and its results are tensors.
bool schema_deferrable(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  if (schema.is_vararg()) return false;
  for (const auto& ret : schema.returns()) {
    if (!is_tensor_like(ret.type())) return false;  // item(), equal(), is_nonzero(): data
  }
  return true;
}

constexpr std::size_t kMaxRecipes = 1 << 16;
std::mutex g_recipes_mutex;
std::unordered_map<std::string, std::shared_ptr<const Recipe>>& recipes() {
  static auto* map = new std::unordered_map<std::string, std::shared_ptr<const Recipe>>();
  return *map;
}

// On the worker: the CPU kernel on the snapshots; fresh results land in their memory.
// `grad_mode`: the caller's grad mode at the call. A kernel may read it (with its inputs'
// requires_grad, which the CPU aliases carry) to keep what only the backward needs; the worker's
// own grad mode says nothing about the caller's.
void run_queued(const c10::OperatorHandle& op, c10::DispatchKeySet ks, c10::DeviceIndex device,
                torch::jit::Stack& stack, const std::vector<Result>& results, bool grad_mode) {
  const c10::AutoGradMode caller_grad_mode(grad_mode);
  const auto& schema = op.schema();
  profiler::KernelActivityScope activity(schema.name(), device);
  if (activity.active()) activity.inputs(stack.data(), stack.size());

  // Fresh results of distinct sizes become the kernel's allocation targets (OutputBlocks).
  c10::SmallVector<OutputBlocks::Block, 2> blocks;
  for (const Result& r : results) {
    if (r.fresh) {
      add_output_block(blocks, r.neuron.storage().mutable_data(), r.neuron.storage().nbytes());
    }
  }

  AliasSession session(device);
  {
    OutputBlocks targets(std::move(blocks));
    run_cpu_kernel(op, ks, &stack, session);
  }
  std::vector<at::Tensor> produced;
  for (const c10::IValue& v : stack) {
    for_each_tensor(v, [&](const at::Tensor& t) { produced.push_back(t); });
  }
  TORCH_CHECK(produced.size() == results.size(), "neuron: ", schema.name(), " returned ",
              produced.size(), " tensors where its meta function returned ", results.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const at::Tensor& cpu = produced[i];
    if (!r.fresh || !r.neuron.defined()) continue;
    if (cpu.defined() && cpu.const_data_ptr() == r.neuron.const_data_ptr() &&
        cpu.dtype() == r.neuron.dtype() && same_geometry(cpu, r.neuron)) {
      continue;  // written in place
    }
    TORCH_CHECK(cpu.defined() && cpu.sizes().equals(r.neuron.sizes()), "neuron: ",
                schema.name(), "'s CPU kernel returned a result of shape ",
                cpu.defined() ? cpu.sizes() : c10::IntArrayRef(), " where its meta function said ",
                r.neuron.sizes());
    at::Tensor target = session.to_cpu(r.neuron);
    at::_ops::copy_::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), target, cpu, false);
  }
  if (activity.active()) {
    for (const Result& r : results) activity.outputs({&r.neuron});
  }
}

std::atomic<const OpHolder*> g_op_holder{nullptr};

// Why the last call this thread could not queue must run at the call, kept while it captures a
// graph (aten/GraphCapture.h), where that call is refused with the reason.
thread_local std::string t_capture_refusal;
bool cannot_queue(const char* why, const char* detail = "") {
  if (launch::capturing()) t_capture_refusal = std::string(why) + detail;
  return false;
}

// The worker's tensors over the memory of `stream`'s own blocks without a reference to it, as an
// accelerator's queue holds none: when the program drops a tensor this work still reads or
// writes, its block returns to the allocator at once, for later work on this stream only until
// this work ran (NeuronCachingAllocator::use_in_stream_order). Holding a reference instead kept
// every queued op's inputs and results alive until it ran, so a loop queued far ahead of the
// device held all of its intermediates at once (40 ops on 100 MiB: 4.1 GiB where the sync mode
// needs 300 MiB). Tensors sharing a storage share one unreferenced storage (memory-overlap checks
// compare storages); other memory (another stream's, recorded, shared or not the allocator's)
// stays referenced.
void use_in_stream_order(torch::jit::Stack& work_stack, std::vector<Result>& results,
                         const c10::Stream& stream, const rt::StreamClock* clock) {
  c10::SmallVector<std::pair<const c10::StorageImpl*, c10::Storage>, 4> storages;
  auto unreferenced = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 || !t.has_storage()) {
      return t;
    }
    const c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
    auto known = std::find_if(storages.begin(), storages.end(),
                              [&](const auto& s) { return s.first == impl; });
    if (known == storages.end()) {
      c10::Storage unowned;
      if (NeuronCachingAllocator::use_in_stream_order(t.storage(), stream, clock)) {
        void* data = const_cast<void*>(t.storage().data());
        unowned = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
            c10::StorageImpl::use_byte_size_t(), t.storage().nbytes(),
            c10::DataPtr(data, data, nullptr, t.storage().device()), /*allocator=*/nullptr,
            /*resizable=*/false));
      }
      storages.emplace_back(impl, std::move(unowned));
      known = storages.end() - 1;
    }
    if (!known->second) return t;
    at::Tensor over = tensor_over(known->second, c10::DispatchKey::PrivateUse1, t);
    carry_requires_grad(t, over);
    return over;
  };
  for (c10::IValue& v : work_stack) v = map_tensors(v, unreferenced);
  for (Result& r : results) r.neuron = unreferenced(r.neuron);
}

}  // namespace

void set_op_holder(const OpHolder* holder) { g_op_holder.store(holder); }

std::string capture_refusal() {
  return t_capture_refusal.empty() ? std::string("it must run at the call") : t_capture_refusal;
}

bool queued_only_in_capture(const c10::OperatorHandle& op) { return !is_aten(op.schema()); }

bool may_defer(const c10::OperatorHandle& op, c10::DispatchKeySet ks) {
  const auto& schema = op.schema();
  return ks.highestPriorityTypeId() == c10::DispatchKey::PrivateUse1 &&  // not sparse
         schema_deferrable(op) && !given_up(&schema);
}

bool defer_op(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack,
              c10::DeviceIndex device, bool hold, RecipeCheck* check, CallArguments* read) {
  const auto& schema = op.schema();
  const std::size_t num_args = schema.arguments().size();
  const std::size_t begin = stack->size() - num_args;

  // The call's signature (the op, the default dtype, every argument) and the worker's stack,
  // read by the fallback's check of the arguments or here. A pointwise op's results have its
  // inputs' shape whatever its floats' values, so one recipe serves every value: a step size or
  // learning rate that changes every step (addcdiv_'s value=, add_'s alpha=) would otherwise
  // make each call the first of its signature, which runs at the call after the queue drains.
  // Python floats at Tensor positions (x * 0.5) are wrapped numbers, keyed by type already.
  std::optional<CallArguments> own;
  if (read == nullptr) {
    if (!may_defer(op, ks)) {
      return cannot_queue("its results are known only once it ran (it returns data to the host, "
                          "takes varargs, or has no meta function)");
    }
    own.emplace(op);
    for (std::size_t i = 0; i < num_args; ++i) {
      if (!own->read((*stack)[begin + i], [](const at::Tensor&) {})) {
        return cannot_queue("it reads arguments a queued op cannot take (CPU tensors that are "
                            "not scalars)");
      }
    }
    read = &*own;
  }
  CallArguments& args = *read;
  std::string& key = args.key();

  std::shared_ptr<const Recipe> recipe;
  {
    std::lock_guard<std::mutex> lock(g_recipes_mutex);
    auto it = recipes().find(key);
    if (it != recipes().end()) recipe = it->second;
  }
  const bool capturing = launch::capturing();
  if (queued_only_in_capture(op)) {
    // Outside a capture it runs at the call; its first call of a signature still learns the
    // recipe below (checked against its CPU kernel), which a capture needs: an extension's meta
    // function is not taken on trust, as ATen's are in a capture.
    if (recipe && !capturing) return false;
    if (!recipe && capturing) {
      return cannot_queue("it is not an ATen op, and this signature of it (its arguments' "
                          "shapes, dtypes and values) never ran outside a capture, where such an "
                          "op's results are learned: run the captured code once before the "
                          "capture (a warm-up)");
    }
  }
  if (recipe && !recipe->queue) {
    return cannot_queue("its meta function disagrees with its CPU kernel, so it runs at the call");
  }
  if (recipe && !recipe->resize.empty()) {
    // Nothing is in an empty out= argument to keep: it gets its memory at the call, as CUDA's
    // resize_output does, and the call then has a signature of its own (the sizes differ), so
    // this branch is not taken again for it.
    const std::vector<at::Tensor> tensors = args.argument_tensors();
    for (const auto& [k, sizes] : recipe->resize) {
      at::_ops::resize_::redispatch(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), tensors[k],
                                    c10::fromIntArrayRefSlow(sizes), std::nullopt);
    }
    return defer_op(op, ks, stack, device, hold, check, nullptr);  // read again: sizes changed
  }
  if (!recipe) {
    // A signature's first call: the meta function's answer, checked against the CPU kernel's
    // results of this call, which runs now (see RecipeCheck).
    torch::jit::Stack meta_stack;
    meta_stack.reserve(num_args);
    for (std::size_t i = 0; i < num_args; ++i) {
      const c10::IValue& v = (*stack)[begin + i];
      if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) {
        meta_stack.emplace_back(c10::Device(c10::kMeta));
      } else {
        meta_stack.push_back(map_tensors(v, [&](const at::Tensor& t) { return args.meta_of(t); }));
      }
    }
    try {
      // Below autograd, as the CPU kernel runs (run_cpu_kernel): meta tensors carry requires_grad.
      const at::AutoDispatchBelowADInplaceOrView below_autograd;
      op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta_stack);
    } catch (const std::exception& e) {
      // Run now: the CPU kernel raises the op's own error, or computes what meta could not.
      count_meta(&schema, false);
      return cannot_queue("its results are known only once it ran; its meta function raised: ",
                          e.what());
    }
    count_meta(&schema, true);
    if (!args.unchanged()) {
      auto sized = args.sized_outs();
      if (!sized.empty()) {  // this call runs now; later ones size their outs and queue
        auto made = std::make_shared<Recipe>();
        made->resize = std::move(sized);
        std::lock_guard<std::mutex> lock(g_recipes_mutex);
        if (recipes().size() >= kMaxRecipes) recipes().clear();
        recipes().emplace(std::move(key), std::move(made));
      }
      return cannot_queue("it resizes an argument (an out= tensor of another size)");
    }
    std::shared_ptr<Recipe> made = args.recipe_of(meta_stack);
    if (!made) return cannot_queue("its results' layout could not be read from its meta function");
    if (capturing) {
      // Captured work runs only at replay, so the meta function's answer is taken as it is (as
      // Inductor takes it), for this call only: an eager call still checks it.
      recipe = std::move(made);
    } else if (check != nullptr) {
      check->key_ = std::move(key);
      check->recipe_ = std::move(made);
      check->tensors_ = args.argument_tensors();
      check->storages_ = args.argument_storages();
    }
    if (!recipe) return false;
  }

  // Results are allocated for this work, queued on the current stream after everything queued
  // on it so far: they may take memory that earlier work there still uses, unreferenced.
  const c10::Stream stream = launch::current_stream(device);
  // Queued work holds no reference to the memory it uses, as an accelerator's queue holds none;
  // captured work does: that memory is the graph's until it is reset.
  const rt::StreamClock* clock =
      launch::collecting() || capturing ? nullptr : launch::stream_clock(stream);
  std::vector<Result> results;
  std::vector<c10::IValue> returned;
  {
    NeuronCachingAllocator::StreamOrderedAllocations ordered(clock);
    returned = args.results_of(*recipe, device, results);
  }
  // The worker holds its own tensors over the results' memory: dropping the last reference to a
  // tensor that has a Python object takes the GIL, which the worker should not need.
  for (Result& r : results) {
    if (r.neuron.defined()) {
      r.neuron = tensor_over(r.neuron.storage(), c10::DispatchKey::PrivateUse1, r.neuron);
    }
  }

  // The worker's stack: snapshots of the neuron arguments, copies of CPU scalars, and for a
  // random op a generator holding the draws reserved for it now (in call order).
  // The caller gets the results' tensors in place of the arguments.
  auto leave_results = [&] {
    stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(begin), stack->end());
    for (auto& v : returned) stack->push_back(std::move(v));
  };
  torch::jit::Stack& work_stack = args.work_stack();
  const char* name = schema.name().c_str();
  const bool grad_mode = c10::GradMode::is_enabled();
  if (const auto g = generator_argument(schema)) {
    const c10::IValue& v = (*stack)[begin + *g];
    const at::Generator source = v.isGenerator() ? v.toGenerator() : default_generator(device);
    if (!is_neuron_generator(source)) {  // the fallback decides what a CPU one does
      return cannot_queue("it draws from a CPU generator");
    }
    int64_t drawn = 0;  // one value per result element, as the fallback counts them
    for (const Result& r : results) drawn += r.neuron.defined() ? r.neuron.numel() : 0;
    if (capturing) {
      // Each replay reserves its own draws, in replay order: new numbers every replay, the same
      // numbers the ops run eagerly from that generator state would draw.
      launch::record(name, [op, ks, device, work_stack, results, grad_mode, g = *g, source,
                            drawn]() -> std::function<void()> {
        torch::jit::Stack replay_stack = work_stack;
        replay_stack[g] = reserve_draws(source, drawn);
        return [op, ks, device, replay_stack = std::move(replay_stack), results,
                grad_mode]() mutable {
          run_queued(op, ks, device, replay_stack, results, grad_mode);
        };
      });
      leave_results();
      return true;
    }
    work_stack[*g] = reserve_draws(source, drawn);
  }
  const OpHolder* holder = g_op_holder.load(std::memory_order_acquire);
  if (hold && holder != nullptr && returned.size() == 1 && returned[0].isTensor()) {
    // Fused mode: the op may be held back, to run fused with the ops around it. Its unfused run
    // uses the stream's memory unreferenced, as queued work does; while it is held, `keep`
    // references that memory (the chain counts those references as its own, see
    // csrc/fused_eager/ChainSignature.cpp's live()).
    const auto strong = std::make_shared<std::pair<torch::jit::Stack, std::vector<Result>>>(
        work_stack, results);
    if (clock != nullptr) use_in_stream_order(work_stack, results, stream, clock);
    std::function<void()> work = [op, ks, device, work_stack, results, grad_mode]() mutable {
      run_queued(op, ks, device, work_stack, results, grad_mode);
    };
    std::shared_ptr<void> keep = strong;
    if (!holder->hold(op, device, &(*stack)[begin], strong->first, returned[0].toTensor(), work,
                      keep)) {
      launch::enqueue(stream, name, std::move(work));
    }
  } else if (capturing) {
    // Captured: every replay runs the op again on the same memory.
    std::function<void()> call =
        prepare_captured_call(op, ks, device, work_stack, results, grad_mode);
    if (!call) {
      call = [op, ks, device, work_stack, results, grad_mode] {
        torch::jit::Stack replay_stack = work_stack;  // the kernel consumes its stack
        run_queued(op, ks, device, replay_stack, results, grad_mode);
      };
    }
    launch::record_rerunnable(name, std::move(call));
  } else {
    if (clock != nullptr) use_in_stream_order(work_stack, results, stream, clock);
    launch::enqueue(stream, name,
                  [op, ks, device, work_stack = std::move(work_stack),
                   results = std::move(results), grad_mode]() mutable {
                    run_queued(op, ks, device, work_stack, results, grad_mode);
                  });
  }

  leave_results();
  return true;
}

RecipeCheck::RecipeCheck() = default;
RecipeCheck::~RecipeCheck() = default;

void RecipeCheck::confirm(const torch::jit::Stack& stack, std::size_t num_returns) {
  if (!recipe_) return;
  auto* recipe = static_cast<Recipe*>(recipe_.get());
  std::vector<at::Tensor> produced;
  bool same = true;
  std::size_t slot = 0;
  for (std::size_t i = stack.size() - num_returns; i < stack.size(); ++i, ++slot) {
    const c10::IValue& v = stack[i];
    const ReturnSlot expected = slot < recipe->returns.size() ? recipe->returns[slot]
                                                              : ReturnSlot{ReturnSlot::kNone, -1};
    if (v.isTensor()) {
      same = same && expected.kind == ReturnSlot::kTensor;
    } else if (v.isTensorList()) {
      same = same && expected.kind == ReturnSlot::kList &&
             static_cast<int>(v.toTensorList().size()) == expected.count;
    } else {
      same = same && v.isNone() && expected.kind == ReturnSlot::kNone;
    }
    for_each_tensor(v, [&](const at::Tensor& t) { produced.push_back(t); });
  }
  same = same && slot == recipe->returns.size() && produced.size() == recipe->outs.size();
  for (std::size_t i = 0; same && i < produced.size(); ++i) {
    const at::Tensor& t = produced[i];
    const OutTensor& o = recipe->outs[i];
    if (o.kind == OutTensor::kUndefined) {
      same = !t.defined();
      continue;
    }
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1 ||
        t.layout() != c10::kStrided || t.scalar_type() != o.dtype ||
        !t.sizes().equals(o.sizes) || !t.strides().equals(o.strides) ||
        t.storage_offset() != o.offset || t.is_conj() != o.conj || t.is_neg() != o.neg) {
      same = false;
      continue;
    }
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    auto argument_storage = std::find_if(storages_.begin(), storages_.end(),
        [&](const c10::Storage& s) { return s.unsafeGetStorageImpl() == storage; });
    switch (o.kind) {
      case OutTensor::kArgument:
        same = tensors_[o.index].unsafeGetTensorImpl() == t.unsafeGetTensorImpl();
        break;
      case OutTensor::kView:
        same = storages_[o.index].unsafeGetStorageImpl() == storage;
        break;
      case OutTensor::kFresh:
        same = argument_storage == storages_.end();
        break;
      case OutTensor::kUndefined:
        break;
    }
  }
  // Where the CPU kernel and the meta function disagree (native_batch_norm's saved statistics
  // in eval mode: [0] on the CPU, [C] from meta), the signature runs now from then on.
  recipe->queue = same;
  std::lock_guard<std::mutex> lock(g_recipes_mutex);
  if (recipes().size() >= kMaxRecipes) recipes().clear();
  recipes().emplace(std::move(key_), std::static_pointer_cast<const Recipe>(recipe_));
}

}  // namespace torchneuron
