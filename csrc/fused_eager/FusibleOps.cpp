#include "fused_eager/FusibleOps.h"

#include <ATen/core/enum_tag.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace torchneuron::fused_eager {
namespace {

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

}  // namespace

void configure_rule(const std::vector<std::string>& reductions,
                    const std::vector<std::pair<std::string, std::string>>& runtime_scalars) {
  std::lock_guard<std::mutex> lock(g_kinds_mutex);
  g_reductions = std::unordered_set<std::string>(reductions.begin(), reductions.end());
  g_runtime_scalars.clear();
  for (const auto& [op, argument] : runtime_scalars) g_runtime_scalars[op] = argument;
  kinds().clear();
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
  return it->second;  // kept until configure_rule (reset() keeps them: they depend on the op only)
}

std::string step_kind(const std::string& qualified_name) {
  const auto colons = qualified_name.find("::");
  TORCH_CHECK(colons != std::string::npos && colons > 0, "step_kind: '", qualified_name,
              "' is not an op's name (like aten::add.Tensor or aten::sum)");
  const auto dot = qualified_name.find('.', colons);
  std::string overload = dot == std::string::npos ? "" : qualified_name.substr(dot + 1);
  if (overload == "default") overload.clear();
  auto op = c10::Dispatcher::singleton().findSchema({qualified_name.substr(0, dot), overload});
  TORCH_CHECK(op.has_value(), "step_kind: no op named '", qualified_name, "'");
  const OpKind& kind = kind_of(*op);
  if (!kind.fusible || kind.in_place || kind.out) return "";
  return kind.reduction ? "reduction" : "pointwise";
}

}  // namespace torchneuron::fused_eager
