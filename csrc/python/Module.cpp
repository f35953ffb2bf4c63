// torchneuron._C: the Python face of the core, bindings only. It holds one submodule per C++
// layer (docs/architecture.md#the-layers) and nothing else, so that a Python import says which
// layer it reaches: `from torchneuron._C import device as _device_c`. Each *Bindings.cpp owns
// one submodule; this file creates the module and calls them, bottom-up.
#include "python/Bindings.h"

#include <torch/csrc/utils/pybind.h>

PYBIND11_MODULE(_C, m) {
  m.doc() = "torchneuron core: one submodule of bindings per layer of the C++ core";
  torchneuron::bind_runtime(m);
  torchneuron::bind_profiler(m);
  torchneuron::bind_launch(m);
  torchneuron::bind_device(m);
  torchneuron::bind_aten(m);
  torchneuron::bind_ops(m);
  torchneuron::bind_compile(m);
  torchneuron::bind_fused_eager(m);
}
