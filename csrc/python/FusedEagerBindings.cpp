// torchneuron._C.fused_eager: fused eager (csrc/fused_eager/): its one fusion rule
// (FusibleOps.h), its configuration, its counters and the compile thread's side of the request
// queue (torchneuron/fused_eager/queue_feeder.py).
#include "python/Bindings.h"

#include "fused_eager/FusedEager.h"
#include "fused_eager/FusibleOps.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

namespace torchneuron {
namespace {

py::object layout_object(const fused_eager::TensorLayout& l) {
  return py::make_tuple(py::reinterpret_borrow<py::object>(
                            reinterpret_cast<PyObject*>(torch::getTHPDtype(l.dtype))),
                        py::tuple(py::cast(l.sizes)), py::tuple(py::cast(l.strides)));
}

// A constant as the Python value the op takes: a dtype argument as a torch.dtype (an int in
// the dispatcher's stack).
py::object constant_object(const c10::IValue& v, const c10::Argument& arg) {
  c10::TypePtr type = arg.type();
  if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
  if (type->kind() == c10::TypeKind::ScalarTypeType && v.isInt()) {
    return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
        torch::getTHPDtype(static_cast<c10::ScalarType>(v.toInt()))));
  }
  return torch::jit::toPyObject(v);
}

// (id, threads, inputs, steps, outputs): inputs ("scalar", value), ("runtime", value: a float
// the kernel reads as a 0-d float64 tensor) or ("tensor", dtype, sizes, strides); steps (op
// name, overload, args) with args ("const", value) / ("input", i) / ("step", k); outputs (step,
// into_input or None, buffer layout or None).
py::object request_object(const fused_eager::Request& r) {
  py::list inputs, steps, outputs;
  for (const auto& in : r.inputs) {
    if (in.runtime) {
      inputs.append(py::make_tuple("runtime", torch::jit::toPyObject(in.value)));
    } else if (in.scalar) {
      inputs.append(py::make_tuple("scalar", torch::jit::toPyObject(in.value)));
    } else {
      py::tuple l = layout_object(in.layout);
      inputs.append(py::make_tuple("tensor", l[0], l[1], l[2]));
    }
  }
  for (const auto& step : r.steps) {
    const auto& schema = step.op.schema();
    py::list args;
    for (std::size_t i = 0; i < step.args.size(); ++i) {
      const auto& a = step.args[i];
      switch (a.kind) {
        case fused_eager::RequestArg::kInput: args.append(py::make_tuple("input", a.index)); break;
        case fused_eager::RequestArg::kStep: args.append(py::make_tuple("step", a.index)); break;
        case fused_eager::RequestArg::kConstant:
          args.append(py::make_tuple("const", constant_object(a.constant, schema.arguments()[i])));
          break;
      }
    }
    const std::string& overload = schema.overload_name();
    steps.append(py::make_tuple(schema.name(), overload.empty() ? "default" : overload, args));
  }
  for (const auto& o : r.outputs) {
    py::object into = py::none(), buffer = py::none();
    if (o.into_input >= 0) {
      into = py::int_(o.into_input);
    } else {
      buffer = layout_object(o.buffer);
    }
    outputs.append(py::make_tuple(o.step, into, buffer));
  }
  return py::make_tuple(r.id, r.threads, inputs, steps, outputs);
}

}  // namespace

void bind_fused_eager(py::module& parent) {
  py::module m = parent.def_submodule("fused_eager", "fused eager (csrc/fused_eager/)");
  m.def("configure_rule", &fused_eager::configure_rule);
  // "pointwise", "reduction" or "" for an op named like "aten::add.Tensor": the rule's answer.
  m.def("step_kind", &fused_eager::step_kind);
  m.def("configure", &fused_eager::configure);
  m.def("holding", &fused_eager::holding);
  // Blocks (without the GIL) until a chain is hot; None after `timeout_ms` (< 0: no timeout).
  m.def("next_request", [](int timeout_ms) -> py::object {
    std::optional<fused_eager::Request> r;
    {
      py::gil_scoped_release no_gil;
      r = fused_eager::next_request(timeout_ms);
    }
    return r ? request_object(*r) : py::none();
  }, py::arg("timeout_ms") = -1);
  // Records a compiled chain's kernel calls (call(tensors) with the launches recorded) and
  // installs them for request `id`; returns None, or why the chain cannot fuse.
  m.def("install", [](std::uint64_t id, py::object call, py::list tensors) -> py::object {
    const std::string why = fused_eager::install_recorded(id, call.ptr(), tensors.ptr());
    return why.empty() ? py::none() : py::object(py::str(why));
  });
  m.def("fail", &fused_eager::fail);
  m.def("reset", &fused_eager::reset, py::call_guard<py::gil_scoped_release>());
  m.def("stats", [] {
    const fused_eager::Stats s = fused_eager::stats();
    py::dict d;
    d["ops_held"] = s.ops_held;
    d["chains"] = s.chains;
    d["chains_fused"] = s.chains_fused;
    d["ops_fused"] = s.ops_fused;
    d["results_skipped"] = s.results_skipped;
    d["signatures"] = s.signatures;
    d["chains_varying"] = s.chains_varying;
    d["requested"] = s.requested;
    d["ready"] = s.ready;
    d["failed"] = s.failed;
    d["held_now"] = s.held_now;
    d["failures"] = s.failures;
    return d;
  });
}

}  // namespace torchneuron
