#include <Python.h>  // first: Python.h must precede standard headers

#include "fused_eager/ChainSignature.h"

#include "aten/SignatureKey.h"

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

namespace torchneuron::fused_eager {
namespace {

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

// True when a step's fresh result is referenced from outside the held chain: its TensorImpl by
// anyone but the chain, or its memory by anything but the chain's own holders (the identity, the
// producing op's queued result, and one snapshot per later op reading it). An uncounted holder
// of the chain's own only makes a result look live: it is then written, never lost.
// A Python object only C++ references keep alive (PyObject preservation: the object holds one
// strong reference, and C++ references keep it) is no holder: no Python code can reach it.
// The Python reference count is read directly, without the GIL (PyObjectSlot's
// has_unique_reference takes it, and a hand-over runs under FusedEager.cpp's g_mutex, which the
// compile thread takes holding the GIL): when it reads 1, only the C++ references keep the
// object, and Python code can reach it again only through them (which the use count would show).
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

}  // namespace

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

}  // namespace torchneuron::fused_eager
