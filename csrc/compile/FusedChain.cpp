#include <Python.h>  // first: Python.h must precede standard headers

#include "compile/FusedChain.h"

#include "aten/DeferredOp.h"
#include "aten/SignatureKey.h"

#include "compile/KernelLaunch.h"
#include "aten/Launch.h"
#include "runtime/ForkSafety.h"
#include "device/NeuronAllocator.h"
#include "profiler/KernelActivity.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/enum_tag.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace torchneuron::fusion {
namespace {

// A chain is handed over at this length: long enough for any pointwise run a model has, short
// enough that its signature stays cheap to build.
constexpr std::size_t kMaxSteps = 64;
// Ops held in open chains at most: the least recently joined chain is handed over beyond it.
// Room for a foreach optimizer's step over a model with 64 parameters (8 ops each, AdamW), and a
// bound on the memory held chains keep (each op's result lives until its chain is handed over).
constexpr std::size_t kMaxHeldSteps = 512;
// And bytes of results held at most (all open chains), and in one chain: a held op's result keeps
// its memory until its chain is handed over, where eager mode (queued in stream order) would
// have reused an intermediate's memory for the next op. Without it a loop of 40 ops on 100 MiB
// held 4.1 GiB; bounded, a chain over large tensors is handed over every few ops, which still
// fuses them (such chains run at memory bandwidth).
constexpr std::size_t kMaxHeldBytes = std::size_t(256) << 20;

// Most floats reach the kernel at run time (an optimizer's bias correction or step size, a
// learning-rate schedule: see append()); a chain whose compiled-in floats change from call to
// call (a clamp bound, an exponent, a float next to float16 tensors) would be compiled anew for
// every value, on the compile thread that shares the machine with the caller. After this many
// signatures that differ only in such values, later ones run unfused, uncounted, uncompiled.
constexpr int kFloatVariants = 4;

// config.py's default (NEURON_FUSION_HOT); configure() sets the configured value.
std::atomic<int> g_hot{20};

// ---------------------------------------------------------------- which ops may be held

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

std::mutex g_kinds_mutex;
std::unordered_set<std::string> g_reductions;  // guarded by g_kinds_mutex
// Op name ("aten::add.Tensor") -> its Scalar-typed argument a kernel reads at run time ("alpha").
std::unordered_map<std::string, std::string> g_runtime_scalars;  // guarded by g_kinds_mutex
std::unordered_map<const c10::FunctionSchema*, OpKind>& kinds() {
  static auto* map = new std::unordered_map<const c10::FunctionSchema*, OpKind>();
  return *map;
}

std::string full_name(const c10::OperatorHandle& op) {
  const auto& name = op.operator_name();
  return name.name + "." + (name.overload_name.empty() ? "default" : name.overload_name);
}

// An argument type a chain can describe: tensors, numbers and lists of numbers, dtypes, strings.
bool describable(c10::TypePtr type) {
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
    case c10::TypeKind::NumberType:
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::ScalarTypeType:
      return true;
    case c10::TypeKind::ListType: {
      const auto element = type->castRaw<c10::ListType>()->getElementType()->kind();
      return element == c10::TypeKind::IntType || element == c10::TypeKind::SymIntType ||
             element == c10::TypeKind::FloatType || element == c10::TypeKind::BoolType;
    }
    default:
      return false;
  }
}

// Pointwise (PyTorch's own tag) or a listed reduction; functional, one tensor result, no draws.
bool functional_fusible(const c10::OperatorHandle& op, bool& reduction) {
  const auto& schema = op.schema();
  if (schema.name().rfind("aten::", 0) != 0 || schema.is_mutable() || schema.is_vararg() ||
      schema.returns().size() != 1 ||
      schema.returns()[0].type()->kind() != c10::TypeKind::TensorType ||
      op.hasTag(at::Tag::nondeterministic_seeded)) {
    return false;
  }
  for (const auto& arg : schema.arguments()) {
    if (!describable(arg.type())) return false;
  }
  reduction = g_reductions.count(full_name(op)) > 0;
  return reduction || op.hasTag(at::Tag::pointwise);
}

OpKind classify(const c10::OperatorHandle& op) {
  OpKind kind;
  const auto& schema = op.schema();
  const std::string& name = schema.name();
  const auto& args = schema.arguments();
  const bool writes_first = !args.empty() && args[0].alias_info() != nullptr &&
                            args[0].alias_info()->isWrite();
  const bool writes_out = !args.empty() && args.back().kwarg_only() && args.back().name() == "out" &&
                          args.back().alias_info() != nullptr && args.back().alias_info()->isWrite();
  if (writes_out) {
    // An out= op (abs.out, which the composite abs calls): its functional op, written into out.
    if (schema.returns().size() != 1) return kind;
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i].alias_info() != nullptr) return kind;
    }
    const std::string& overload = schema.overload_name();
    std::vector<std::string> candidates;
    if (overload == "out") {
      candidates = {"", "Tensor"};
    } else if (overload.size() > 4 && overload.compare(overload.size() - 4, 4, "_out") == 0) {
      candidates = {overload.substr(0, overload.size() - 4)};
    }
    for (const std::string& candidate : candidates) {
      auto functional = c10::Dispatcher::singleton().findSchema({name, candidate});
      if (!functional) continue;
      const auto& fargs = functional->schema().arguments();
      bool same = fargs.size() + 1 == args.size();
      for (std::size_t i = 0; same && i < fargs.size(); ++i) same = fargs[i].name() == args[i].name();
      bool reduction = false;
      if (!same || !functional_fusible(*functional, reduction) || reduction) continue;
      kind.fusible = kind.out = true;
      kind.functional = *functional;
      return kind;
    }
    return kind;
  }
  if (!writes_first) {
    kind.fusible = functional_fusible(op, kind.reduction);
    if (kind.fusible) kind.functional = op;
    return kind;
  }
  // An in-place op (add_): its functional op (add) with the same arguments, written back.
  if (name.empty() || name.back() != '_' || schema.returns().size() != 1) return kind;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i].alias_info() != nullptr) return kind;
  }
  auto functional = c10::Dispatcher::singleton().findSchema(
      {name.substr(0, name.size() - 1), schema.overload_name()});
  if (!functional || functional->schema().arguments().size() != args.size()) return kind;
  bool reduction = false;
  if (!functional_fusible(*functional, reduction) || reduction) return kind;
  kind.fusible = kind.in_place = true;
  kind.functional = *functional;
  return kind;
}

const OpKind& kind_of(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(g_kinds_mutex);
  auto it = kinds().find(&op.schema());
  if (it == kinds().end()) {
    OpKind kind = classify(op);
    if (kind.functional) {
      const auto& fargs = kind.functional->schema().arguments();
      kind.runtime_scalar.assign(fargs.size(), false);
      auto named = g_runtime_scalars.find(full_name(*kind.functional));
      for (std::size_t i = 0; named != g_runtime_scalars.end() && i < fargs.size(); ++i) {
        kind.runtime_scalar[i] = fargs[i].name() == named->second;
      }
    }
    it = kinds().emplace(&op.schema(), std::move(kind)).first;
  }
  return it->second;  // entries are never removed (reset() keeps them: they depend on the op only)
}

// ---------------------------------------------------------------- held chains

struct ArgRef {
  RequestArg::Kind kind = RequestArg::kConstant;
  int index = 0;      // input or step
  int identity = -1;  // tensors: the tensor identity it reads
  c10::IValue constant;
};

struct HeldStep {
  OpKind kind;
  std::vector<ArgRef> args;
  int identity;  // the tensor identity this step's result is
  const char* name;
  std::function<void()> work;  // the op's unfused run
  // References to the memory `work` uses unreferenced (stream order, see DeferredOp.cpp), kept
  // while the op is held: live() counts them as the chain's own holders.
  std::shared_ptr<void> keep;
};

struct ChainInput {
  bool scalar = false;
  c10::IValue value;    // scalar: the Python number
  at::Tensor snapshot;  // tensor: its metadata at the call and its memory
  bool runtime = false;  // scalar: a float the kernel reads at each call (not in the signature)
};

// A tensor the chain reads or writes, by the caller's TensorImpl: an external input (input >= 0)
// or a step's fresh result; `last_step` is the step whose value it holds now (-1: unwritten).
struct Identity {
  at::Tensor caller;
  const c10::StorageImpl* storage;
  int input = -1;
  int first_step = -1;
  int last_step = -1;
};

struct HeldChain {
  c10::Stream stream;
  std::vector<HeldStep> steps;
  std::vector<ChainInput> inputs;
  std::vector<Identity> identities;
  std::uint64_t touched = 0;  // when an op last joined it (g_touches)
  std::size_t result_bytes = 0;  // of its steps' results (in-place ones too: an upper bound)
  explicit HeldChain(c10::Stream s) : stream(s) {}
};

// Whether the chain writes the identity's memory (a fresh result, or an input written in place)
// rather than only reading it.
bool writes(const Identity& e) { return e.input < 0 || e.last_step >= 0; }

std::mutex g_mutex;  // the held chains, the signatures and the stats

// The open chains of every stream, oldest first. A stream has several: an op joins the chain
// that wrote memory it reads or writes, or read memory it writes (merging them when there are
// several), and otherwise opens one. Independent work interleaved in program order (an
// optimizer's per-parameter updates, the foreach optimizers' op-by-op sweeps over all
// parameters) then still makes one chain per parameter, while work that only shares what it
// reads (calls of one function on the same input) stays apart. Open chains are independent, so
// they may be handed over in any order.
std::vector<std::unique_ptr<HeldChain>>& chains() {
  static auto* list = new std::vector<std::unique_ptr<HeldChain>>();
  return *list;
}

// Which open chains hold each storage: the one that writes it, or those that only read it.
struct MemoryIndex {
  std::unordered_map<const c10::StorageImpl*, HeldChain*> writer;
  std::unordered_map<const c10::StorageImpl*, c10::SmallVector<HeldChain*, 2>> readers;

  void add(const Identity& e, HeldChain* chain) {
    if (writes(e)) {
      auto found = readers.find(e.storage);  // its readers were merged into `chain`
      if (found != readers.end()) readers.erase(found);
      writer[e.storage] = chain;
    } else {
      auto& list = readers[e.storage];
      if (std::find(list.begin(), list.end(), chain) == list.end()) list.push_back(chain);
    }
  }
  void remove(const Identity& e, const HeldChain* chain) {
    auto w = writer.find(e.storage);
    if (w != writer.end() && w->second == chain) writer.erase(w);
    auto r = readers.find(e.storage);
    if (r == readers.end()) return;
    auto& list = r->second;
    list.erase(std::remove(list.begin(), list.end(), chain), list.end());
    if (list.empty()) readers.erase(r);
  }
};
MemoryIndex& memory_index() {
  static auto* index = new MemoryIndex();
  return *index;
}
std::uint64_t g_touches = 0;    // ops held so far: the clock of HeldChain::touched
std::size_t g_held_steps = 0;   // ops in open chains, all streams
std::size_t g_held_bytes = 0;   // their results' bytes (HeldChain::result_bytes)

struct Entry {
  std::uint64_t id;
  std::int64_t hits = 0;
  enum State : std::uint8_t { kCold, kRequested, kReady, kFailed } state = kCold;
  std::shared_ptr<const RecordedProgram> program;
};
std::unordered_map<std::string, std::shared_ptr<Entry>>& entries() {
  static auto* map = new std::unordered_map<std::string, std::shared_ptr<Entry>>();
  return *map;
}
std::unordered_map<std::uint64_t, std::shared_ptr<Entry>>& entries_by_id() {
  static auto* map = new std::unordered_map<std::uint64_t, std::shared_ptr<Entry>>();
  return *map;
}
std::uint64_t g_next_id = 1;
Stats g_stats;
// Per signature without float values: how many signatures with values it had (kFloatVariants).
std::unordered_map<std::string, int>& float_variants() {
  static auto* map = new std::unordered_map<std::string, int>();
  return *map;
}

// Never destroyed: the compile thread waits on them until the process ends, and destroying a
// condition variable with a waiter blocks the exit (glibc).
std::mutex& g_requests_mutex = *new std::mutex();
std::condition_variable& g_requests_cv = *new std::condition_variable();
std::deque<Request>& requests() {
  static auto* queue = new std::deque<Request>();
  return *queue;
}

const bool g_fork_registered = [] {
  rt::hold_across_fork(g_mutex);
  rt::hold_across_fork(g_requests_mutex);
  return true;
}();

bool is_neuron(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// A Python number's value (a wrapped-number CPU tensor), as the Python type it came as.
c10::IValue number_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case c10::kBool: return c10::IValue(t.const_data_ptr<bool>()[0]);
    case c10::kLong: return c10::IValue(t.const_data_ptr<int64_t>()[0]);
    case c10::kDouble: return c10::IValue(t.const_data_ptr<double>()[0]);
    case c10::kComplexDouble:
      return c10::IValue(c10::complex<double>(t.const_data_ptr<c10::complex<double>>()[0]));
    default: return c10::IValue();
  }
}

// A Python number may join an in-place op without changing what the functional op computes:
// not a float into an integer tensor, not a complex into a real one.
bool number_fits(const c10::IValue& number, c10::ScalarType self) {
  if (number.isComplexDouble()) return c10::isComplexType(self);
  if (number.isDouble()) return c10::isFloatingType(self) || c10::isComplexType(self);
  return true;
}

// Appends the op to the chain; false (the chain unchanged) when it cannot join it: an argument
// the chain cannot describe, a new input sharing memory with a tensor the chain holds, an
// in-place op whose arguments would be promoted.
bool append(HeldChain& chain, const OpKind& kind, const char* name, const c10::IValue* args,
            const torch::jit::Stack& snapshots, const at::Tensor& result,
            std::function<void()>& work, std::shared_ptr<void>& keep) {
  const std::size_t num_args = kind.functional->schema().arguments().size();
  const int step = static_cast<int>(chain.steps.size());
  std::vector<ArgRef> refs(num_args);
  std::vector<ChainInput> new_inputs;
  std::vector<Identity> new_identities;
  const c10::ScalarType self_dtype =
      kind.in_place && args[0].isTensor() ? args[0].toTensor().scalar_type()
                                          : c10::ScalarType::Undefined;
  // A float reaches the kernel at run time (as a 0-d float64 tensor) only where that computes
  // what the Python number does: some operand with dimensions is float32 or float64, so the
  // number is rounded to the result's type either way and a 0-d float64 tensor promotes nothing
  // (over a float16 tensor or an integer one it would). One kernel then serves every value.
  bool float_operands = false;
  for (std::size_t i = 0; i < num_args && !float_operands; ++i) {
    if (!args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    float_operands = is_neuron(t) && t.dim() > 0 &&
                     (t.scalar_type() == c10::kFloat || t.scalar_type() == c10::kDouble);
  }
  auto add_number = [&](ArgRef& ref, c10::IValue number, bool runtime) {
    ref.kind = RequestArg::kInput;
    ref.index = static_cast<int>(chain.inputs.size() + new_inputs.size());
    new_inputs.push_back(ChainInput{true, std::move(number), at::Tensor(), runtime});
  };
  auto find_identity = [&](const c10::TensorImpl* impl) -> int {
    for (std::size_t k = 0; k < chain.identities.size(); ++k) {
      if (chain.identities[k].caller.unsafeGetTensorImpl() == impl) return static_cast<int>(k);
    }
    for (std::size_t k = 0; k < new_identities.size(); ++k) {
      if (new_identities[k].caller.unsafeGetTensorImpl() == impl) {
        return static_cast<int>(chain.identities.size() + k);
      }
    }
    return -1;
  };
  // Whether `storage` is the memory of a tensor the chain (or this op, so far) holds.
  auto held_memory = [&](const c10::StorageImpl* storage) {
    auto same = [&](const Identity& e) { return e.storage == storage; };
    return std::any_of(chain.identities.begin(), chain.identities.end(), same) ||
           std::any_of(new_identities.begin(), new_identities.end(), same);
  };
  // A new external input (its snapshot at the call), as a tensor identity of the chain; -1 when
  // its memory is another held tensor's (the fused kernel reads and writes each element once,
  // in one order).
  auto add_input = [&](const at::Tensor& t, const at::Tensor& snapshot) -> int {
    const c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    if (held_memory(storage)) return -1;
    const int input = static_cast<int>(chain.inputs.size() + new_inputs.size());
    new_inputs.push_back(ChainInput{false, c10::IValue(), snapshot, false});
    new_identities.push_back(Identity{t, storage, input, -1, -1});
    return static_cast<int>(chain.identities.size() + new_identities.size() - 1);
  };
  for (std::size_t i = 0; i < num_args; ++i) {
    const c10::IValue& v = args[i];
    ArgRef& ref = refs[i];
    if (!v.isTensor()) {
      if (v.isTensorList() || v.isGenerator() || v.isObject() || v.isDevice()) return false;
      if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) {
          if (!(e.isInt() || e.isDouble() || e.isBool())) return false;
        }
      } else if (!(v.isNone() || v.isInt() || v.isDouble() || v.isBool() || v.isString() ||
                   v.isComplexDouble())) {
        return false;  // symbolic values
      }
      if (v.isDouble() && float_operands && kind.runtime_scalar[i]) {
        add_number(ref, v, true);
        continue;
      }
      ref.constant = v;
      continue;
    }
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      ref.constant = c10::IValue();
      continue;
    }
    if (!is_neuron(t)) {
      // A Python number: an input of the chain whose value is compiled in.
      if (!t.unsafeGetTensorImpl()->is_wrapped_number()) return false;
      c10::IValue number = number_of(t);
      if (number.isNone()) return false;
      if (kind.in_place && !number_fits(number, self_dtype)) return false;
      const bool runtime = number.isDouble() && float_operands;
      add_number(ref, std::move(number), runtime);
      continue;
    }
    if (t.layout() != c10::kStrided || !t.has_storage() || t.is_conj() || t.is_neg() ||
        (kind.in_place && t.scalar_type() != self_dtype)) {
      return false;
    }
    int id = find_identity(t.unsafeGetTensorImpl());
    if (id < 0) id = add_input(t, snapshots[i].toTensor());
    if (id < 0) return false;
    const Identity& e = id < static_cast<int>(chain.identities.size())
                            ? chain.identities[id]
                            : new_identities[id - chain.identities.size()];
    ref.identity = id;
    if (e.last_step >= 0) {
      ref.kind = RequestArg::kStep;
      ref.index = e.last_step;
    } else {
      ref.kind = RequestArg::kInput;
      ref.index = e.input;
    }
  }
  int defines = -1;
  if (kind.in_place) {
    defines = refs[0].identity;
    if (defines < 0) return false;
  } else if (kind.out) {
    // The out tensor: a tensor the chain holds, or a new input the step is written into (it
    // may not share memory with anything the chain holds).
    const c10::IValue& v = args[num_args];
    if (!v.isTensor() || !is_neuron(v.toTensor()) || v.toTensor().layout() != c10::kStrided ||
        v.toTensor().is_conj() || v.toTensor().is_neg()) {
      return false;
    }
    const at::Tensor& out = v.toTensor();
    defines = find_identity(out.unsafeGetTensorImpl());
    if (defines < 0) defines = add_input(out, snapshots[num_args].toTensor());
    if (defines < 0) return false;
  } else {
    if (!is_neuron(result) || result.layout() != c10::kStrided) return false;
    const c10::StorageImpl* storage = result.storage().unsafeGetStorageImpl();
    if (held_memory(storage)) return false;  // a view of its input, not a fresh result
    defines = static_cast<int>(chain.identities.size() + new_identities.size());
    new_identities.push_back(
        Identity{result, result.storage().unsafeGetStorageImpl(), -1, step, -1});
  }
  for (auto& i : new_inputs) chain.inputs.push_back(std::move(i));
  for (auto& i : new_identities) chain.identities.push_back(std::move(i));
  chain.identities[defines].last_step = step;
  chain.steps.push_back(
      HeldStep{kind, std::move(refs), defines, name, std::move(work), std::move(keep)});
  return true;
}

// A constant argument: a plain value or a list of them; without `float_values`, a float or
// complex number by its type only.
void put_constant(std::string& key, const c10::IValue& v, bool float_values) {
  if (!float_values && put_number_type(key, v)) return;
  if (put_scalar(key, v) || !v.isList()) return;
  key += '[';
  put(key, v.toListRef().size());
  for (const c10::IValue& e : v.toListRef()) put_constant(key, e, float_values);
}

void put_layout(std::string& key, const at::Tensor& t) {
  put(key, t.scalar_type());
  put(key, t.dim());
  for (int64_t d : t.sizes()) put(key, d);
  for (int64_t d : t.strides()) put(key, d);
}

TensorLayout layout_of(const at::Tensor& t) {
  return TensorLayout{t.scalar_type(), t.sizes().vec(), t.strides().vec()};
}

// What the fused kernel writes: every external input an op wrote in place, and the fresh results
// someone besides the chain can still read.
struct ChainOutput {
  int step;
  int into_input;  // -1: into `buffer`
  at::Tensor buffer;
};

// True when a step's fresh result is referenced from outside the held chain: its TensorImpl by
// anyone but the chain, or its memory by anything but the chain's own holders (the identity, the
// producing op's queued result, and one snapshot per later op reading it). An uncounted holder
// of the chain's own only makes a result look live: it is then written, never lost.
// A Python object only C++ references keep alive (PyObject preservation: the object holds one
// strong reference, and C++ references keep it) is no holder: no Python code can reach it.
// The Python reference count is read directly, without the GIL (PyObjectSlot's
// has_unique_reference takes it, and a hand-over runs under g_mutex, which the compile thread
// takes holding the GIL): when it reads 1, only the C++ references keep the object, and Python
// code can reach it again only through them (which the use count would show).
std::size_t strong_references(std::size_t use_count, const c10::impl::PyObjectSlot* slot) {
  PyObject* object = slot->load_pyobj();
  return object != nullptr && Py_REFCNT(object) == 1 ? use_count - 1 : use_count;
}

bool live(const HeldChain& chain, int identity) {
  const Identity& e = chain.identities[identity];
  const c10::TensorImpl* impl = e.caller.unsafeGetTensorImpl();
  if (strong_references(e.caller.use_count(), impl->pyobj_slot()) > 1) return true;
  std::size_t holders = 2;
  for (std::size_t s = static_cast<std::size_t>(e.first_step) + 1; s < chain.steps.size(); ++s) {
    for (const ArgRef& ref : chain.steps[s].args) {
      if (ref.identity == identity) {
        ++holders;
        break;
      }
    }
  }
  const c10::Storage& storage = e.caller.storage();
  return strong_references(storage.use_count(), storage.unsafeGetStorageImpl()->pyobj_slot()) >
         holders;
}

// A chain whose results nobody can read still runs (as on an accelerator, work whose result is
// dropped is done): it writes its last step's result.
std::vector<ChainOutput> outputs_of(const HeldChain& chain) {
  std::vector<ChainOutput> outputs;
  const int last = chain.steps.back().identity;
  for (std::size_t k = 0; k < chain.identities.size(); ++k) {
    const Identity& e = chain.identities[k];
    if (e.last_step < 0) continue;
    if (e.input >= 0) {
      outputs.push_back({e.last_step, e.input, at::Tensor()});
    } else if (live(chain, static_cast<int>(k))) {
      outputs.push_back({e.last_step, -1, e.caller});
    }
  }
  if (outputs.empty()) outputs.push_back({chain.identities[last].last_step, -1,
                                          chain.identities[last].caller});
  return outputs;
}

// The chain's compile-cache key; without `float_values`, the key of every chain that differs
// from it only in float values (kFloatVariants).
std::string signature_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                         int threads, bool float_values) {
  std::string key;
  key.reserve(64 + 48 * chain.steps.size());
  put(key, threads);
  put(key, chain.inputs.size());
  for (const ChainInput& in : chain.inputs) {
    if (in.runtime) {
      key += 'R';  // one kernel serves every value
    } else if (in.scalar) {
      key += 'S';
      put_constant(key, in.value, float_values);
    } else {
      key += 'T';
      put_layout(key, in.snapshot);
    }
  }
  put(key, chain.steps.size());
  for (const HeldStep& step : chain.steps) {
    put(key, &step.kind.functional->schema());
    for (const ArgRef& ref : step.args) {
      put(key, static_cast<char>(ref.kind));
      if (ref.kind == RequestArg::kConstant) {
        put_constant(key, ref.constant, float_values);
      } else {
        put(key, ref.index);
      }
    }
  }
  for (const ChainOutput& o : outputs) {
    key += 'O';
    put(key, o.step);
    put(key, o.into_input);
    if (o.into_input < 0) put_layout(key, o.buffer);
  }
  return key;
}

Request request_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                   std::uint64_t id, int threads) {
  Request r{id, threads, {}, {}, {}};
  for (const ChainInput& in : chain.inputs) {
    RequestInput ri;
    ri.scalar = in.scalar;
    ri.runtime = in.runtime;
    if (in.scalar) {
      ri.value = in.value;
    } else {
      ri.layout = layout_of(in.snapshot);
    }
    r.inputs.push_back(std::move(ri));
  }
  for (const HeldStep& step : chain.steps) {
    RequestStep rs{*step.kind.functional, {}};
    for (const ArgRef& ref : step.args) rs.args.push_back({ref.kind, ref.index, ref.constant});
    r.steps.push_back(std::move(rs));
  }
  for (const ChainOutput& o : outputs) {
    r.outputs.push_back({o.step, o.into_input,
                         o.into_input < 0 ? layout_of(o.buffer) : TensorLayout{}});
  }
  return r;
}

// Queues the chain's kernel calls as one item over its buffers: the chain's tensor inputs and
// runtime scalars (each a float64 the item holds), then its output buffers (in the order the
// calls were recorded over), then scratch memory the generated code uses, allocated by the
// worker for the item's length.
void enqueue_fused(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                   std::shared_ptr<const RecordedProgram> program) {
  std::vector<std::uintptr_t> pointers;
  // The buffers' memory until the kernels ran, but for the stream's own blocks, which the
  // allocator reuses in stream order (NeuronCachingAllocator::use_in_stream_order).
  std::vector<c10::Storage> keep;
  const rt::StreamClock* clock = launch::stream_clock(chain.stream);
  // (Collected into a compiled graph's item, which the clock does not count yet: all kept.)
  const bool collecting = launch::collecting();
  auto add = [&](const at::Tensor& t) {
    pointers.push_back(reinterpret_cast<std::uintptr_t>(t.data_ptr()));
    if (collecting ||
        !NeuronCachingAllocator::use_in_stream_order(t.storage(), chain.stream, clock)) {
      keep.push_back(t.storage());
    }
  };
  std::vector<double> numbers;         // the runtime scalars' values...
  std::vector<std::size_t> number_at;  // ... and where their pointers go
  for (const ChainInput& in : chain.inputs) {
    if (!in.scalar) {
      add(in.snapshot);
    } else if (in.runtime) {
      number_at.push_back(pointers.size());
      pointers.push_back(0);
      numbers.push_back(in.value.toDouble());
    }
  }
  for (const ChainOutput& o : outputs) {
    if (o.into_input < 0) add(o.buffer);
  }
  const c10::DeviceIndex device = chain.stream.device_index();
  launch::enqueue_held(chain.stream, "fused chain",
                     [program = std::move(program), pointers = std::move(pointers),
                      keep = std::move(keep), numbers = std::move(numbers),
                      number_at = std::move(number_at), device]() mutable {
                       profiler::KernelActivityScope activity("neuron::fused_chain", device);
                       for (std::size_t k = 0; k < numbers.size(); ++k) {
                         pointers[number_at[k]] = reinterpret_cast<std::uintptr_t>(&numbers[k]);
                       }
                       std::vector<c10::DataPtr> scratch;
                       const c10::Device d(c10::DeviceType::PrivateUse1, device);
                       for (std::size_t nbytes : program->scratch_nbytes) {
                         scratch.push_back(neuron_allocator().allocate_on(device, nbytes, d));
                         pointers.push_back(reinterpret_cast<std::uintptr_t>(scratch.back().get()));
                       }
                       std::vector<std::uintptr_t> args;
                       for (const RecordedCall& call : program->calls) {
                         args.resize(call.buffer.size());
                         for (std::size_t i = 0; i < args.size(); ++i) {
                           args[i] = call.buffer[i] >= 0 ? pointers[call.buffer[i]] + call.value[i]
                                                         : call.value[i];
                         }
                         call_recorded(call, args.data());
                       }
                     });
}

// The chain's entry (a new one the first time its signature is seen); nullptr when it is one more
// signature of a chain whose floats keep changing (kFloatVariants).
Entry* entry_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs, int threads) {
  std::string key = signature_of(chain, outputs, threads, true);
  auto found = entries().find(key);
  if (found != entries().end()) return found->second.get();
  int& variants = float_variants()[signature_of(chain, outputs, threads, false)];
  if (variants >= kFloatVariants) return nullptr;
  ++variants;
  auto entry = std::make_shared<Entry>();
  entry->id = g_next_id++;
  entries_by_id()[entry->id] = entry;
  ++g_stats.signatures;
  return entries().emplace(std::move(key), std::move(entry)).first->second.get();
}

// Hands the chain over (under g_mutex); the caller's tensors it held go to `drop`, to be
// released after the lock (releasing one with a Python object takes the GIL).
void flush(HeldChain& chain, std::vector<at::Tensor>& drop) {
  const auto n = static_cast<std::int64_t>(chain.steps.size());
  if (n == 0) return;
  bool fused = false;
  if (n >= 2 && holding()) {
    ++g_stats.chains;
    std::vector<ChainOutput> outputs = outputs_of(chain);
    const int threads = at::get_num_threads();
    Entry* entry = entry_of(chain, outputs, threads);
    if (entry == nullptr) {
      ++g_stats.chains_varying;  // runs unfused, as async mode runs it
    } else if (entry->state == Entry::kReady) {
      enqueue_fused(chain, outputs, entry->program);
      fused = true;
      ++g_stats.chains_fused;
      g_stats.ops_fused += n;
      std::int64_t fresh = 0;
      for (const Identity& e : chain.identities) fresh += e.input < 0;
      std::int64_t written = 0;
      for (const ChainOutput& o : outputs) written += o.into_input < 0;
      g_stats.results_skipped += fresh - written;
    } else if (entry->state == Entry::kCold && ++entry->hits >= g_hot.load()) {
      entry->state = Entry::kRequested;
      ++g_stats.requested;
      {
        std::lock_guard<std::mutex> lock(g_requests_mutex);
        requests().push_back(request_of(chain, outputs, entry->id, threads));
      }
      g_requests_cv.notify_one();
    }
  }
  if (!fused) {
    const bool collecting = launch::collecting();
    for (HeldStep& step : chain.steps) {
      if (collecting) {
        // Collected into an item queued later (a compiled graph's ItemScope), which its stream's
        // clock does not count yet: the references go with the work, until it ran.
        step.work = [work = std::move(step.work), keep = std::move(step.keep)]() { work(); };
      }
      launch::enqueue_held(chain.stream, step.name, std::move(step.work));
    }
  }
  launch::add_held(-n);  // after the hand-over: the device never looks idle in between
  for (Identity& e : chain.identities) drop.push_back(std::move(e.caller));
  chain.steps.clear();
  chain.inputs.clear();
  chain.identities.clear();
}

// Hands the chain over; it stays open, empty.
void hand_over_only(HeldChain& chain, std::vector<at::Tensor>& drop) {
  for (const Identity& e : chain.identities) memory_index().remove(e, &chain);
  g_held_steps -= chain.steps.size();
  g_held_bytes -= chain.result_bytes;
  chain.result_bytes = 0;
  flush(chain, drop);
}

// Closes `chain`: removes it from the open chains (it holds nothing any more, or was absorbed).
void close_chain(HeldChain* chain) {
  auto& open = chains();
  open.erase(std::find_if(open.begin(), open.end(),
                          [&](const std::unique_ptr<HeldChain>& c) { return c.get() == chain; }));
}

// Hands `chain` over and closes it.
void hand_over(HeldChain* chain, std::vector<at::Tensor>& drop) {
  hand_over_only(*chain, drop);
  close_chain(chain);
}

void flush_held(const c10::Stream* stream) {
  std::vector<at::Tensor> drop;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& open = chains();
  for (auto& chain : open) {
    if (stream == nullptr || chain->stream == *stream) hand_over_only(*chain, drop);
  }
  open.erase(std::remove_if(open.begin(), open.end(),
                            [](const std::unique_ptr<HeldChain>& c) { return c->steps.empty(); }),
             open.end());
}

// The identity of `into` over the same memory as `e`, or -1.
int same_memory(const HeldChain& into, const Identity& e) {
  for (std::size_t k = 0; k < into.identities.size(); ++k) {
    if (into.identities[k].storage == e.storage) return static_cast<int>(k);
  }
  return -1;
}

// Two chains may merge when the memory they share is the same tensor that neither writes (calls
// of a function on one input): a chain never holds two tensors over one storage, as append()
// ensures within a chain (the fused kernel reads and writes each element once, in one order).
bool mergeable(const HeldChain& into, const HeldChain& from) {
  for (const Identity& e : from.identities) {
    const int k = same_memory(into, e);
    if (k < 0) continue;
    const Identity& mine = into.identities[k];
    if (mine.caller.unsafeGetTensorImpl() != e.caller.unsafeGetTensorImpl() || writes(mine) ||
        writes(e)) {
      return false;
    }
  }
  return true;
}

// Appends `from`'s steps after `into`'s (the chains are independent: any order computes the
// same; mergeable()) and closes `from`. A tensor both read is one input of the merged chain.
void absorb(HeldChain& into, HeldChain* from) {
  const int steps = static_cast<int>(into.steps.size());
  std::vector<int> identity_at(from->identities.size(), -1);
  std::vector<int> input_at(from->inputs.size(), -1);
  for (std::size_t j = 0; j < from->identities.size(); ++j) {
    const Identity& e = from->identities[j];
    memory_index().remove(e, from);
    const int k = same_memory(into, e);
    if (k >= 0) {  // the same tensor, only read by both: one input
      identity_at[j] = k;
      input_at[e.input] = into.identities[k].input;
    }
  }
  for (std::size_t i = 0; i < from->inputs.size(); ++i) {
    if (input_at[i] >= 0) continue;
    input_at[i] = static_cast<int>(into.inputs.size());
    into.inputs.push_back(std::move(from->inputs[i]));
  }
  for (std::size_t j = 0; j < from->identities.size(); ++j) {
    if (identity_at[j] >= 0) continue;
    Identity& e = from->identities[j];
    if (e.input >= 0) e.input = input_at[e.input];
    if (e.first_step >= 0) e.first_step += steps;
    if (e.last_step >= 0) e.last_step += steps;
    identity_at[j] = static_cast<int>(into.identities.size());
    into.identities.push_back(std::move(e));
    memory_index().add(into.identities.back(), &into);
  }
  for (HeldStep& step : from->steps) {
    step.identity = identity_at[step.identity];
    for (ArgRef& ref : step.args) {
      if (ref.identity >= 0) ref.identity = identity_at[ref.identity];
      if (ref.kind == RequestArg::kInput) ref.index = input_at[ref.index];
      if (ref.kind == RequestArg::kStep) ref.index += steps;
    }
    into.steps.push_back(std::move(step));
  }
  into.touched = std::max(into.touched, from->touched);
  into.result_bytes += std::exchange(from->result_bytes, 0);
  close_chain(from);
}

// The open chain of `stream` the op joins: the one that wrote memory it reads or writes or read
// memory it writes, the merge of them when there are several; a new chain when there is none, or
// when the merge would pass kMaxSteps (they are then handed over). A chain of another stream
// whose memory it touches so is handed over to that stream (the program orders the two streams;
// holding it here would only delay its work).
HeldChain* chain_for(const c10::Stream& stream, const OpKind& kind, const c10::IValue* args,
                     std::size_t count, std::vector<at::Tensor>& drop) {
  MemoryIndex& index = memory_index();
  const std::size_t out = kind.out ? kind.functional->schema().arguments().size() : count;
  std::vector<HeldChain*> touched;
  auto touch = [&](HeldChain* chain) {
    if (chain->stream != stream) {
      hand_over(chain, drop);
    } else if (std::find(touched.begin(), touched.end(), chain) == touched.end()) {
      touched.push_back(chain);
    }
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (!args[i].isTensor() || !is_neuron(args[i].toTensor()) ||
        !args[i].toTensor().has_storage()) {
      continue;
    }
    const c10::StorageImpl* storage = args[i].toTensor().storage().unsafeGetStorageImpl();
    auto w = index.writer.find(storage);
    if (w != index.writer.end()) touch(w->second);
    if ((kind.in_place && i == 0) || i == out) {
      auto r = index.readers.find(storage);
      if (r == index.readers.end()) continue;
      const auto readers = r->second;  // touch() may hand one over, which edits the list
      for (HeldChain* chain : readers) touch(chain);
    }
  }
  std::size_t steps = 1;
  for (HeldChain* c : touched) steps += c->steps.size();
  bool mergeable_all = true;
  for (std::size_t a = 0; a < touched.size() && mergeable_all; ++a) {
    for (std::size_t b = a + 1; b < touched.size() && mergeable_all; ++b) {
      mergeable_all = mergeable(*touched[a], *touched[b]);
    }
  }
  if (steps > kMaxSteps || !mergeable_all) {
    for (HeldChain* c : touched) hand_over(c, drop);
    touched.clear();
  }
  if (touched.empty()) return chains().emplace_back(std::make_unique<HeldChain>(stream)).get();
  // Merged in the order the chains were opened, into the oldest: a loop merges the same way
  // each iteration, so its signatures repeat.
  HeldChain* into = nullptr;
  std::vector<HeldChain*> merge;
  for (const auto& c : chains()) {
    if (std::find(touched.begin(), touched.end(), c.get()) == touched.end()) continue;
    if (into == nullptr) {
      into = c.get();
    } else {
      merge.push_back(c.get());
    }
  }
  for (HeldChain* c : merge) absorb(*into, c);
  return into;
}

// Beyond kMaxHeldSteps or kMaxHeldBytes, hands over the least recently joined chains (not
// `keep`).
void bound_held(const HeldChain* keep, std::vector<at::Tensor>& drop) {
  while (g_held_steps > kMaxHeldSteps || g_held_bytes > kMaxHeldBytes) {
    HeldChain* oldest = nullptr;
    for (const auto& c : chains()) {
      if (c.get() != keep && (oldest == nullptr || c->touched < oldest->touched)) {
        oldest = c.get();
      }
    }
    if (oldest == nullptr) return;
    hand_over(oldest, drop);
  }
}

// Appends the op to `chain`, indexing the memory it brought in.
bool append_indexed(HeldChain& chain, const OpKind& kind, const char* name,
                    const c10::IValue* args, const torch::jit::Stack& snapshots,
                    const at::Tensor& result, std::function<void()>& work,
                    std::shared_ptr<void>& keep) {
  const std::size_t known = chain.identities.size();
  if (!append(chain, kind, name, args, snapshots, result, work, keep)) return false;
  for (std::size_t k = known; k < chain.identities.size(); ++k) {
    memory_index().add(chain.identities[k], &chain);
  }
  const int defines = chain.steps.back().identity;  // an input it wrote is the chain's now
  if (static_cast<std::size_t>(defines) < known) {
    memory_index().add(chain.identities[defines], &chain);
  }
  chain.touched = ++g_touches;
  ++g_held_steps;
  const std::size_t bytes = result.defined() ? result.nbytes() : 0;
  chain.result_bytes += bytes;
  g_held_bytes += bytes;
  return true;
}

}  // namespace

void configure(int hot, const std::vector<std::string>& reductions,
               const std::vector<std::pair<std::string, std::string>>& runtime_scalars) {
  {
    std::lock_guard<std::mutex> lock(g_kinds_mutex);
    g_reductions = std::unordered_set<std::string>(reductions.begin(), reductions.end());
    g_runtime_scalars.clear();
    for (const auto& [op, argument] : runtime_scalars) g_runtime_scalars[op] = argument;
    kinds().clear();
  }
  g_hot.store(std::max(1, hot));
  launch::set_held_flush(&flush_held);
  static const OpHolder holder{&hold};
  set_op_holder(&holder);
}

bool holding() { return launch::effective_mode() == launch::EagerMode::kFused; }

bool hold(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::IValue* args,
          const torch::jit::Stack& snapshots, const at::Tensor& result,
          std::function<void()>& work, std::shared_ptr<void>& keep) {
  const OpKind& kind = kind_of(op);
  if (!kind.fusible) return false;
  const c10::Stream stream = launch::current_stream(device);
  std::vector<at::Tensor> drop;
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::size_t count = op.schema().arguments().size();
  HeldChain* chain = chain_for(stream, kind, args, count, drop);
  const char* name = op.schema().name().c_str();
  if (!append_indexed(*chain, kind, name, args, snapshots, result, work, keep)) {
    // It touches a held tensor's memory through another tensor (a view): after the chain, in a
    // chain of its own.
    if (chain->steps.empty()) {
      close_chain(chain);  // an op opened it and then could not join it
      return false;
    }
    hand_over(chain, drop);
    chain = chain_for(stream, kind, args, count, drop);
    if (!append_indexed(*chain, kind, name, args, snapshots, result, work, keep)) {
      close_chain(chain);  // an op opened it and then could not join it
      return false;
    }
  }
  launch::add_held(1);
  ++g_stats.ops_held;
  if (kind.reduction || chain->steps.size() >= kMaxSteps ||
      chain->result_bytes >= kMaxHeldBytes) {
    hand_over(chain, drop);
  } else {
    bound_held(chain, drop);
  }
  return true;
}

std::optional<Request> next_request(int timeout_ms) {
  std::unique_lock<std::mutex> lock(g_requests_mutex);
  auto ready = [] { return !requests().empty(); };
  if (timeout_ms < 0) {
    g_requests_cv.wait(lock, ready);
  } else if (!g_requests_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return std::nullopt;
  }
  Request r = std::move(requests().front());
  requests().pop_front();
  return r;
}

void install(std::uint64_t id, RecordedProgram program) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = entries_by_id().find(id);
  if (it == entries_by_id().end()) return;  // forgotten by reset()
  it->second->program = std::make_shared<const RecordedProgram>(std::move(program));
  it->second->state = Entry::kReady;
  ++g_stats.ready;
}

void fail(std::uint64_t id, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = entries_by_id().find(id);
  if (it == entries_by_id().end()) return;
  it->second->state = Entry::kFailed;
  ++g_stats.failed;
  if (g_stats.failures.size() < 16) g_stats.failures.push_back(why);
}

Stats stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  Stats s = g_stats;
  s.held_now = static_cast<std::int64_t>(g_held_steps);
  return s;
}

void reset() {
  launch::settle();
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    requests().clear();
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  entries().clear();
  entries_by_id().clear();
  float_variants().clear();
  g_stats = Stats();
}

}  // namespace torchneuron::fusion
