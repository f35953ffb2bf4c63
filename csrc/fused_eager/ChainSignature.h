// What a held chain is handed over as: the results its fused kernel writes (outputs_of), its
// compile-cache key (signature_of) and its description for the compile thread (request_of).
#pragma once

#include "fused_eager/ChainRequest.h"
#include "fused_eager/HeldChain.h"

#include <cstdint>
#include <string>
#include <vector>

namespace torchneuron::fused_eager {

// What the fused kernel writes: every external input an op wrote in place, and the fresh results
// someone besides the chain can still read.
struct ChainOutput {
  int step;
  int into_input;  // -1: into `buffer`
  at::Tensor buffer;
};

// A chain whose results nobody can read still runs (as on an accelerator, work whose result is
// dropped is done): it writes its last step's result.
std::vector<ChainOutput> outputs_of(const HeldChain& chain);

// The chain's compile-cache key for `threads` intra-op threads; without `float_values`, the key
// of every chain that differs from it only in float values.
std::string signature_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                         int threads, bool float_values);

Request request_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                   std::uint64_t id, int threads);

}  // namespace torchneuron::fused_eager
