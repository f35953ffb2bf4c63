#include "aten/Accounting.h"

#include "profiler/PythonLine.h"
#include "runtime/ForkSafety.h"

#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace torchneuron::accounting {

std::atomic<bool> g_enabled{false};

namespace {

std::mutex g_mutex;
[[maybe_unused]] const bool g_mutex_fork_safe = (rt::hold_across_fork(g_mutex), true);
std::unordered_set<std::string> g_signatures;  // key_all's keys, the op's schema first
std::unordered_set<std::string> g_ops_seen;
std::unordered_map<std::string, Record> g_records;  // kind + op + location
// Replaced whole by set_host_fallback_ops, so a reader copies the pointer under the lock.
std::shared_ptr<const std::unordered_map<std::string, std::string>> g_fallback_ops =
    std::make_shared<const std::unordered_map<std::string, std::string>>();

std::string full_name(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name : op.name + "." + op.overload_name;
}

// torch's name of a dtype ("float32"), as a Python user reads it.
std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    case c10::kLong: return "int64";
    case c10::kInt: return "int32";
    case c10::kShort: return "int16";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kBool: return "bool";
    default: return c10::toString(t);  // the float8 family and the rest: c10's own names
  }
}

// "float32[8, 16]": what a per-shape runtime keys its compiled kernel by.
void describe(std::string& out, const at::Tensor& t) {
  if (!out.empty()) out += ", ";
  if (!t.defined()) {
    out += "None";
    return;
  }
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    out += "scalar";  // a Python number: its value is an argument, not part of the shape
    return;
  }
  out += dtype_name(t.scalar_type());
  if (t.layout() != c10::kStrided) {
    out += ' ';
    out += c10::str(t.layout());
  }
  out += '[';
  for (std::size_t i = 0; i < t.sizes().size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(t.sizes()[i]);
  }
  out += ']';
}

// Every tensor of an argument (a tensor, a list of them, lists of lists), described in order.
// The launch layer's own walk: aten/IValueTensors.h belongs to the layer above.
void describe_all(std::string& out, const c10::IValue& v) {
  if (v.isTensor()) {
    describe(out, v.toTensor());
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) describe(out, t);
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) describe_all(out, e);
  }
}

// Adds to the record (kind, op, the user's line), creating it with `detail`; under g_mutex.
Record& record(const char* kind, const std::string& op, const std::string& location,
               const std::string& detail) {
  std::string key = kind;
  key += '\0';
  key += op;
  key += '\0';
  key += location;
  auto [it, fresh] = g_records.try_emplace(std::move(key));
  if (fresh) {
    it->second.kind = kind;
    it->second.op = op;
    it->second.location = location;
    it->second.detail = detail;
  }
  return it->second;
}

// The binary key of a call's tensors (what describe() writes as text, cheaper to build): every
// call builds it; the text is written only for a signature not seen before.
template <typename T>
void put(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void key_all(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    key += 'T';
    if (!t.defined()) return;
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      key += 'S';
      put(key, t.scalar_type());  // an int or a float number may make a different kernel
      return;
    }
    put(key, t.scalar_type());
    put(key, t.layout());
    put(key, static_cast<std::uint8_t>(t.dim()));
    for (const std::int64_t size : t.sizes()) put(key, size);
  } else if (v.isTensorList()) {
    key += 'L';
    for (const at::Tensor& t : v.toTensorList()) key_all(key, c10::IValue(t));
  } else if (v.isList()) {
    key += 'G';
    for (const c10::IValue& e : v.toListRef()) key_all(key, e);
  }
}

}  // namespace

void set_enabled(bool on) { g_enabled.store(on); }

void op_call(const c10::OperatorHandle& handle, const c10::IValue* args, std::size_t num_args) {
  // The schema's address names the op for as long as it is registered.
  std::string key;
  put(key, &handle.schema());
  for (std::size_t i = 0; i < num_args; ++i) key_all(key, args[i]);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_signatures.count(key) != 0) return;  // the common case: a signature already seen
  }
  std::string tensors;
  for (std::size_t i = 0; i < num_args; ++i) describe_all(tensors, args[i]);
  const std::string op = full_name(handle.operator_name());
  // The user's line is read without the lock: it may take the GIL.
  const std::string location = profiler::user_python_line();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_signatures.insert(std::move(key)).second) return;
  const bool seen_op = !g_ops_seen.insert(op).second;
  ++record("signature", op, location, tensors).count;
  if (seen_op) ++record("recompile", op, location, tensors).count;
}

const char* host_fallback_reason(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                 bool float64) {
  if (float64) return "float64";
  // The kernel the fallback runs is the highest key's (a sparse operand makes it sparse); a
  // key set's has_any would match any neuron tensor, by the PrivateUse1 backend bit alone.
  const c10::DispatchKey key = ks.highestPriorityTypeId();
  if (key == c10::DispatchKey::SparsePrivateUse1 ||
      key == c10::DispatchKey::SparseCsrPrivateUse1) {
    return "sparse";
  }
  std::shared_ptr<const std::unordered_map<std::string, std::string>> ops;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ops = g_fallback_ops;
  }
  if (ops->empty()) return nullptr;
  const c10::OperatorName& name = op.operator_name();
  auto it = ops->find(full_name(name));
  if (it == ops->end()) it = ops->find(name.name);
  return it == ops->end() ? nullptr : it->second.c_str();  // lives as long as the table
}

void host_fallback(const c10::OperatorHandle& op, const char* reason, std::int64_t bytes_to_host,
                   std::int64_t bytes_from_host, std::int64_t cpu_ns) {
  const std::string location = profiler::user_python_line();
  std::lock_guard<std::mutex> lock(g_mutex);
  Record& r = record("host_fallback", full_name(op.operator_name()), location, reason);
  ++r.count;
  r.bytes_to_host += bytes_to_host;
  r.bytes_from_host += bytes_from_host;
  r.cpu_ns += cpu_ns;
}

void set_host_fallback_ops(std::vector<std::pair<std::string, std::string>> ops) {
  auto table = std::make_shared<std::unordered_map<std::string, std::string>>();
  for (auto& [name, reason] : ops) (*table)[std::move(name)] = std::move(reason);
  // Reasons handed out earlier (host_fallback_reason) stay valid: old tables are kept.
  static std::vector<std::shared_ptr<const std::unordered_map<std::string, std::string>>> kept;
  std::lock_guard<std::mutex> lock(g_mutex);
  kept.push_back(g_fallback_ops);
  g_fallback_ops = std::move(table);
}

bool data_dependent_shape(const c10::OperatorHandle& op, const c10::IValue* args,
                          std::size_t num_args) {
  if (!op.hasTag(at::Tag::dynamic_output_shape)) return false;
  const std::string& name = op.operator_name().name;
  if (name != "aten::index" && name != "aten::_unsafe_index") return true;
  if (num_args < 2 || !args[1].isList()) return true;
  for (const c10::IValue& index : args[1].toListRef()) {
    if (index.isTensor()) {
      const c10::ScalarType t = index.toTensor().scalar_type();
      if (t == c10::kBool || t == c10::kByte) return true;
    }
  }
  return false;
}

const char* sync_cause_name(SyncCause cause) {
  switch (cause) {
    case SyncCause::kItem: return "item";
    case SyncCause::kCopyToHost: return "copy to host";
    case SyncCause::kDataDependentShape: return "data-dependent shape";
    case SyncCause::kSynchronize: return "synchronize";
    case SyncCause::kEventSynchronize: return "event synchronize";
  }
  return "?";
}

void sync(SyncCause cause, const std::string& op, std::int64_t bytes) {
  const std::string location = profiler::user_python_line();
  std::lock_guard<std::mutex> lock(g_mutex);
  Record& r = record("sync", op, location, sync_cause_name(cause));
  ++r.count;
  r.bytes_to_host += bytes;
}

std::vector<Record> records() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<Record> out;
  out.reserve(g_records.size());
  for (const auto& [key, r] : g_records) out.push_back(r);
  return out;
}

void reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_signatures.clear();
  g_ops_seen.clear();
  g_records.clear();
}

}  // namespace torchneuron::accounting
