// The one place above the runtime seam that asks whether device memory is host-addressable
// (rt::Capabilities). Everything that treats neuron memory as host memory asks here first: the
// CPU aliases (csrc/aten/CpuAlias.h, and through them the boxed fallback and gloo's zero-copy
// collectives), the native kernels' fast paths that run CPU kernels on neuron tensors
// (csrc/aten/native/), and Inductor's CPU code generation for neuron buffers (asked from
// torchneuron/compile through torchneuron._C). On a runtime whose memory a CPU cannot address,
// the fast paths step aside and the first aliasing fails with one error that says why.
#pragma once

namespace torchneuron {

// Cheap: read once from the runtime, then a load.
bool host_addressable();
// Raises (RuntimeError) naming the runtime and `what` needed host access, when it has none.
// Otherwise waits for queued device work (and raises its pending error): on a calling thread,
// every host access to device memory is a synchronization point (aten/Launch.h).
void require_host_access(const char* what);
// Tests only: pretend the runtime's memory is (not) host-addressable.
void override_host_addressable_for_testing(bool addressable);

}  // namespace torchneuron
