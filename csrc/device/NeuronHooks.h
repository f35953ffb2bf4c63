// PrivateUse1 hooks (NeuronHooks.cpp): what ATen asks of a device backend that it cannot learn
// from the dispatcher.
#pragma once

namespace torchneuron {

// Registers the hooks with ATen; once, at import of torchneuron.
void register_hooks();

}  // namespace torchneuron
