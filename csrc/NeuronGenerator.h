// The neuron RNG: one default generator per device, plus user generators
// (torch.Generator(device="neuron")). Kernels run on the CPU, so the generator is a CPU
// Mersenne-Twister generator that reports the neuron device; GeneratorBridge hands its state to
// a CPU-typed generator for the length of one CPU kernel and takes the advanced state back.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace torchneuron {

struct NeuronGeneratorImpl : public at::CPUGeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex device);

 private:
  NeuronGeneratorImpl* clone_impl() const override;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
bool is_neuron_generator(const at::Generator& gen);

class GeneratorBridge {
 public:
  explicit GeneratorBridge(const at::Generator& neuron_gen);
  ~GeneratorBridge();
  GeneratorBridge(const GeneratorBridge&) = delete;
  GeneratorBridge& operator=(const GeneratorBridge&) = delete;
  // A CPU generator carrying the neuron generator's state; valid until the bridge ends.
  const at::Generator& cpu() const { return cpu_; }

 private:
  at::Generator neuron_;
  at::Generator cpu_;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace torchneuron
