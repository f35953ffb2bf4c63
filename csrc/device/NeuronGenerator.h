// The neuron RNG: one default generator per device, plus user generators
// (torch.Generator(device="neuron")). Its state is shaped like CUDA's Philox generator, a
// (seed, offset) pair, because PyTorch code written for accelerators relies on that shape:
// DTensor's OffsetBasedRNGTracker gives each shard its own offset, and fork_rng / activation
// checkpointing save and replay 16-byte states. Kernels run on the CPU, so GeneratorBridge
// derives a CPU generator from (seed, offset) for the length of one CPU kernel and then moves
// the offset past the numbers that kernel produced.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <cstdint>
#include <mutex>

namespace torchneuron {

struct NeuronGeneratorImpl : public c10::GeneratorImpl {
  explicit NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed = c10::default_rng_seed_val);

  void set_current_seed(uint64_t seed) override;  // also resets the offset to 0, as CUDA does
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  // Offsets count random numbers and stay multiples of 4, as CUDA's Philox offsets do.
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override { return offset_; }
  // 16 bytes: seed (uint64) then offset (uint64), native byte order, CUDA's layout.
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  static constexpr std::size_t kStateBytes = 2 * sizeof(uint64_t);

 private:
  NeuronGeneratorImpl* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The device's own default generator: what torch.neuron's seeding and RNG state, and PyTorch's
// hooks (torch.manual_seed), use.
const at::Generator& device_generator(c10::DeviceIndex device);
// What a random op on the device draws from when it is passed no generator: the device's own
// generator, or, with NEURON_RNG=cpu (set_draws_from_cpu_generator), the CPU's default generator
// itself, so that a seeded program draws the same numbers in the same order as on the CPU. The
// CPU generator is not a neuron one: a queued op given it runs at its call (DeferredOp.cpp), so
// its draws interleave with the program's CPU draws in program order.
const at::Generator& default_generator(c10::DeviceIndex device);
void set_draws_from_cpu_generator(bool on);
bool draws_from_cpu_generator();
at::Generator new_generator(c10::DeviceIndex device);
bool is_neuron_generator(const at::Generator& gen);

// For a kernel that runs later (queued, aten/Launch.h): a private generator holding
// `gen`'s (seed, offset) now, while `gen`'s offset moves past the `numel` values the kernel will
// draw, as the kernel's GeneratorBridge would move it. Queued draws thus equal synchronous ones.
at::Generator reserve_draws(const at::Generator& gen, int64_t numel);

// Holds the neuron generator's lock for one CPU kernel. The kernel draws from a thread-local CPU
// generator whose whole mt19937 state is filled from Philox(seed, offset), so its numbers depend
// only on (seed, offset): replaying a state replays them, and distinct offsets give independent
// streams. When the bridge ends, the offset moves on by the work the kernel reported through
// advance_past (at least 4).
// Given the CPU's default generator (NEURON_RNG=cpu), the bridge hands it to the kernel as it is,
// which locks it itself.
class GeneratorBridge {
 public:
  explicit GeneratorBridge(const at::Generator& neuron_gen);
  ~GeneratorBridge();
  GeneratorBridge(const GeneratorBridge&) = delete;
  GeneratorBridge& operator=(const GeneratorBridge&) = delete;
  // A CPU generator for this (seed, offset); valid until the bridge ends.
  const at::Generator& cpu() const { return cpu_; }
  // The kernel produced `numel` random values (its outputs' elements).
  void advance_past(int64_t numel);

 private:
  at::Generator neuron_;
  at::Generator cpu_;
  std::unique_lock<std::mutex> lock_;
  uint64_t advance_ = 4;
};

}  // namespace torchneuron
