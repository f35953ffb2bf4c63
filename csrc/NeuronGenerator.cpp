#include "NeuronGenerator.h"

#include "NeuronGuard.h"
#include "runtime/NeuronRuntime.h"

#include <c10/core/DispatchKeySet.h>

#include <memory>
#include <vector>

namespace torchneuron {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device) {
  device_ = c10::Device(c10::DeviceType::PrivateUse1, device);
  key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* gen = new NeuronGeneratorImpl(device_.index());
  gen->set_engine(const_cast<NeuronGeneratorImpl*>(this)->engine());
  gen->set_next_float_normal_sample(
      const_cast<NeuronGeneratorImpl*>(this)->next_float_normal_sample());
  gen->set_next_double_normal_sample(
      const_cast<NeuronGeneratorImpl*>(this)->next_double_normal_sample());
  return gen;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    for (int d = 0; d < rt::device_count(); ++d) {
      generators.push_back(at::make_generator<NeuronGeneratorImpl>(d));
      generators.back().set_current_seed(c10::detail::getNonDeterministicRandom());
    }
  });
  const c10::DeviceIndex index = device < 0 ? current_device() : device;
  check_device(index);
  return generators[index];
}

at::Generator new_generator(c10::DeviceIndex device) {
  const c10::DeviceIndex index = device < 0 ? current_device() : device;
  check_device(index);
  return at::make_generator<NeuronGeneratorImpl>(index);
}

bool is_neuron_generator(const at::Generator& gen) {
  return gen.defined() && gen.device().type() == c10::DeviceType::PrivateUse1;
}

namespace {
thread_local at::Generator t_cpu_worker;
}

GeneratorBridge::GeneratorBridge(const at::Generator& neuron_gen)
    : neuron_(neuron_gen), lock_(const_cast<at::Generator&>(neuron_gen).mutex()) {
  if (!t_cpu_worker.defined()) t_cpu_worker = at::make_generator<at::CPUGeneratorImpl>();
  cpu_ = t_cpu_worker;
  auto* src = neuron_.get<NeuronGeneratorImpl>();
  auto* dst = cpu_.get<at::CPUGeneratorImpl>();
  dst->set_engine(src->engine());
  dst->set_next_float_normal_sample(src->next_float_normal_sample());
  dst->set_next_double_normal_sample(src->next_double_normal_sample());
}

GeneratorBridge::~GeneratorBridge() {
  auto* src = cpu_.get<at::CPUGeneratorImpl>();
  auto* dst = neuron_.get<NeuronGeneratorImpl>();
  dst->set_engine(src->engine());
  dst->set_next_float_normal_sample(src->next_float_normal_sample());
  dst->set_next_double_normal_sample(src->next_double_normal_sample());
}

}  // namespace torchneuron
