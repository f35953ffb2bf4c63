// A queued op captured in a device graph (aten/GraphCapture.h), prepared once for every replay:
// the graph's memory stays where it is, so the CPU aliases of the op's arguments and results
// are made at capture, and a replay calls the CPU kernel on them directly, without the per-call
// work of a queued op (aliases made and dropped, results adopted back).
#pragma once

#include "aten/CallArguments.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <vector>

namespace torchneuron {

// The replay of one captured op: `work_stack` holds the op's arguments (neuron snapshots, CPU
// scalars), `results` what the caller got. Empty when the op needs the general path: a random
// op (its draws are made per replay), a sparse operand, or memory the CPU may not address
// directly (NEURON_MEMORY_PROTECT=1, a runtime without host access).
std::function<void()> prepare_captured_call(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                            c10::DeviceIndex device,
                                            const torch::jit::Stack& work_stack,
                                            const std::vector<Result>& results, bool grad_mode);

}  // namespace torchneuron
