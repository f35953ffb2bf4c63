// Extensions' host kernels on neuron tensors. A C++ extension that registers its kernels as
// catch-alls (TORCH_LIBRARY's m.def("op", &fn): the kernel lands under CompositeImplicitAutograd)
// gets them run directly on neuron tensors, on the calling thread: the dispatcher prefers a
// CompositeImplicitAutograd kernel to a backend's fallback, so the boxed fallback's wait for
// queued work never happens, and such a kernel reads and writes neuron memory through data
// pointers while queued ops may still be producing it (vLLM CPU's attention and KV-cache ops
// are 29 of its 90 `_C` ops). guard_host_kernels gives every catch-all-only op of a namespace a
// neuron kernel that waits for the queued work first and runs the catch-all with nested neuron
// ops in place (launch::InlineScope), in the extension's order; in synchronous mode the wait is
// one atomic load.
#pragma once

#include <string>
#include <vector>

namespace torchneuron {

// Registers the guard for every op of `ns` whose only kernel is a catch-all (none for CPU or
// neuron), at the neuron key and at its autograd key (which the catch-all fills too, so that
// outside inference mode the guard runs as well; the catch-all's own neuron ops still record
// autograd). Returns the ops it guarded this call (none when called again); an unknown namespace
// is an error.
std::vector<std::string> guard_host_kernels(const std::string& ns);

}  // namespace torchneuron
