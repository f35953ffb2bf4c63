// Walks the dispatcher's operators of one namespace, for the registrations made at run time
// (route_to_cpu_kernels in Fallback.cpp, guard_host_kernels in HostKernels.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace torchneuron {

// Calls fn(op, short_name) for every operator registered in namespace `ns` (e.g. "aten"), where
// short_name is "name[.overload]" without the namespace, as torch::Library::impl takes it.
// Returns whether the namespace has any operator.
template <typename Fn>
bool for_each_op_in(const std::string& ns, Fn&& fn) {
  auto& dispatcher = c10::Dispatcher::singleton();
  const std::string prefix = ns + "::";
  bool any = false;
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind(prefix, 0) != 0) continue;
    any = true;
    auto op = dispatcher.findOp(name);
    if (!op) continue;
    std::string short_name = name.name.substr(prefix.size());
    if (!name.overload_name.empty()) short_name += "." + name.overload_name;
    fn(*op, std::move(short_name));
  }
  return any;
}

}  // namespace torchneuron
