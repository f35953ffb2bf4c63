#include "aten/Float64Gate.h"

#include <atomic>

namespace torchneuron {
namespace {

std::atomic<Float64Check> g_check{nullptr};

}  // namespace

void install_float64_check(Float64Check check) { g_check.store(check); }

void check_float64(const c10::OperatorName& op) {
  if (Float64Check check = g_check.load()) check(op);
}

}  // namespace torchneuron
