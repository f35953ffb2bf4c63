// A hot chain as fused eager describes it to its compile thread
// (torchneuron/fused_eager/queue_feeder.py), through the bindings: its inputs, its steps
// (functional ops over inputs, earlier steps and constants) and the outputs the kernel writes.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <vector>

namespace torchneuron::fused_eager {

struct RequestArg {
  enum Kind : std::uint8_t { kConstant, kInput, kStep } kind = kConstant;
  int index = 0;          // the input or step (kInput, kStep)
  c10::IValue constant;   // kConstant
};
struct RequestStep {
  c10::OperatorHandle op;  // the functional op (an in-place op's result is written by outputs)
  std::vector<RequestArg> args;
};
struct TensorLayout {
  c10::ScalarType dtype;
  std::vector<int64_t> sizes, strides;
};
struct RequestInput {
  bool scalar = false;
  bool runtime = false;  // a scalar float the kernel reads at each call (a 0-d float64 tensor)
  c10::IValue value;     // a Python number the op received (scalar)
  TensorLayout layout;   // a tensor (not scalar)
};
struct RequestOutput {
  int step;
  int into_input;  // -1: a buffer of its own, laid out as `buffer`
  TensorLayout buffer;
};
struct Request {
  std::uint64_t id;
  int threads;
  std::vector<RequestInput> inputs;
  std::vector<RequestStep> steps;
  std::vector<RequestOutput> outputs;
};

}  // namespace torchneuron::fused_eager
