// torch.autocast("neuron"): the cast policy registered for AutocastPrivateUse1 (Autocast.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace torchneuron {

// The registered op lists by cast policy ("lower_precision_fp", "fp32", "promote", ...), for
// torchneuron/ops/autocast.py and the tests.
std::map<std::string, std::vector<std::string>> autocast_op_lists();

}  // namespace torchneuron
