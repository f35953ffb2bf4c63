#include "device/NeuronGenerator.h"

#include "device/CurrentDevice.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/core/MT19937RNGEngine.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <ATen/ops/empty.h>
#include <c10/core/DispatchKeySet.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace torchneuron {

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t NeuronGeneratorImpl::seed() {
  const uint64_t random = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(random);
  return random;
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "neuron generator: offset must be a multiple of 4 (as CUDA's "
              "Philox offsets are), got ", offset);
  offset_ = offset;
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  const char* layout = "a contiguous torch.uint8 CPU tensor of 16 bytes laid out as "
                       "(seed: uint64, offset: uint64), as torch.neuron.get_rng_state() returns";
  TORCH_CHECK_TYPE(new_state.layout() == c10::kStrided &&
                       new_state.device().type() == c10::kCPU &&
                       new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() &&
                       new_state.is_contiguous(),
                   "neuron RNG state must be ", layout, "; got a ",
                   c10::typeMetaToScalarType(new_state.dtype()), " tensor on ",
                   new_state.device());
  TORCH_CHECK(static_cast<std::size_t>(new_state.numel()) == kStateBytes,
              "neuron RNG state must be ", layout, "; got ", new_state.numel(), " bytes");
  uint64_t seed = 0, offset = 0;
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed, bytes, sizeof(seed));
  std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
  set_offset(offset);  // checks it before anything changes
  seed_ = seed;
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::kByte);
  auto* bytes = static_cast<uint8_t*>(state.data_ptr());
  std::memcpy(bytes, &seed_, sizeof(seed_));
  std::memcpy(bytes + sizeof(seed_), &offset_, sizeof(offset_));
  return state.getIntrusivePtr();
}

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* gen = new NeuronGeneratorImpl(device_.index(), seed_);
  gen->offset_ = offset_;
  return gen;
}

const at::Generator& device_generator(c10::DeviceIndex device) {
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

namespace {
std::atomic<bool> g_draw_from_cpu{false};
}  // namespace

void set_draws_from_cpu_generator(bool on) { g_draw_from_cpu.store(on); }

bool draws_from_cpu_generator() { return g_draw_from_cpu.load(); }

const at::Generator& default_generator(c10::DeviceIndex device) {
  if (g_draw_from_cpu.load(std::memory_order_relaxed)) {
    check_device(device < 0 ? current_device() : device);
    return at::detail::getDefaultCPUGenerator();
  }
  return device_generator(device);
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

// The whole mt19937 state comes from Philox keyed by the seed, on the subsequence named by the
// offset: all 128 bits of (seed, offset) matter (seeding mt19937 with a hash would keep 32), and
// Philox subsequences are independent by construction.
at::mt19937 engine_for(uint64_t seed, uint64_t offset) {
  at::Philox4_32 philox(seed, /*subsequence=*/offset, /*offset=*/0);
  at::mt19937_data_pod data{};
  for (uint32_t& word : data.state_) word = philox();
  data.seed_ = seed;
  data.seeded_ = true;
  data.left_ = 1;  // the first draw twists the state, as after mt19937's own seeding
  data.next_ = 0;
  at::mt19937 engine;
  engine.set_data(data);
  return engine;
}

}  // namespace

GeneratorBridge::GeneratorBridge(const at::Generator& neuron_gen) : neuron_(neuron_gen) {
  if (!is_neuron_generator(neuron_gen)) {  // NEURON_RNG=cpu: the CPU's default generator
    cpu_ = neuron_gen;
    return;
  }
  lock_ = std::unique_lock<std::mutex>(const_cast<at::Generator&>(neuron_gen).mutex());
  if (!t_cpu_worker.defined()) t_cpu_worker = at::make_generator<at::CPUGeneratorImpl>();
  cpu_ = t_cpu_worker;
  const auto* src = neuron_.get<NeuronGeneratorImpl>();
  auto* dst = cpu_.get<at::CPUGeneratorImpl>();
  dst->set_engine(engine_for(src->current_seed(), src->get_offset()));
  // Cached Box-Muller samples belong to the previous (seed, offset).
  dst->set_next_float_normal_sample(std::nullopt);
  dst->set_next_double_normal_sample(std::nullopt);
}

namespace {
// Offsets move by the values drawn, rounded up to Philox's 4, and by at least 4.
uint64_t offset_advance(int64_t numel) {
  const uint64_t n = numel > 0 ? static_cast<uint64_t>(numel) : 0;
  return std::max<uint64_t>(4, (n + 3) / 4 * 4);
}
}  // namespace

void GeneratorBridge::advance_past(int64_t numel) { advance_ = offset_advance(numel); }

at::Generator reserve_draws(const at::Generator& gen, int64_t numel) {
  auto* source = gen.get<NeuronGeneratorImpl>();
  at::Generator snapshot = new_generator(gen.device().index());
  auto* copy = snapshot.get<NeuronGeneratorImpl>();
  std::lock_guard<std::mutex> lock(const_cast<at::Generator&>(gen).mutex());
  copy->set_current_seed(source->current_seed());
  copy->set_offset(source->get_offset());
  source->set_offset(source->get_offset() + offset_advance(numel));
  return snapshot;
}

GeneratorBridge::~GeneratorBridge() {
  if (!is_neuron_generator(neuron_)) return;  // the CPU generator moved on by itself
  auto* gen = neuron_.get<NeuronGeneratorImpl>();
  gen->set_offset(gen->get_offset() + advance_);
}

}  // namespace torchneuron
