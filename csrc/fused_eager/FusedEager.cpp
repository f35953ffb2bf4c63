#include "fused_eager/FusedEager.h"  // first: it includes Python.h

#include "fused_eager/ChainSignature.h"
#include "fused_eager/FusibleOps.h"
#include "fused_eager/HeldChain.h"

#include "aten/DeferredOp.h"
#include "aten/Launch.h"
#include "compile/KernelLaunch.h"
#include "device/NeuronAllocator.h"
#include "profiler/KernelActivity.h"
#include "runtime/ForkSafety.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace torchneuron::fused_eager {
namespace {

// A chain is handed over at this length: long enough for any pointwise run a model has, short
// enough that its signature stays cheap to build.
constexpr std::size_t kMaxSteps = 64;
// Ops held in open chains at most: the least recently joined chain is handed over beyond it.
// Room for a foreach optimizer's step over a model with 64 parameters (8 ops each, AdamW), and a
// bound on the memory held chains keep (each op's result lives until its chain is handed over).
constexpr std::size_t kMaxHeldSteps = 512;
// And bytes of results held at most (all open chains), and in one chain: a held op's result keeps
// its memory until its chain is handed over, where eager mode (queued in stream order) would
// have reused an intermediate's memory for the next op. Without it a loop of 40 ops on 100 MiB
// held 4.1 GiB; bounded, a chain over large tensors is handed over every few ops, which still
// fuses them (such chains run at memory bandwidth).
constexpr std::size_t kMaxHeldBytes = std::size_t(256) << 20;

// Most floats reach the kernel at run time (an optimizer's bias correction or step size, a
// learning-rate schedule: see HeldChain.cpp); a chain whose compiled-in floats change from call to
// call (a clamp bound, an exponent, a float next to float16 tensors) would be compiled anew for
// every value, on the compile thread that shares the machine with the caller. After this many
// signatures that differ only in such values, later ones run unfused, uncounted, uncompiled.
constexpr int kFloatVariants = 4;

// config.py's default (NEURON_FUSION_HOT); configure() sets the configured value.
std::atomic<int> g_hot{20};

std::mutex g_mutex;  // the held chains, the signatures and the stats

// The open chains of every stream, oldest first. A stream has several: an op joins the chain
// that wrote memory it reads or writes, or read memory it writes (merging them when there are
// several), and otherwise opens one. Independent work interleaved in program order (an
// optimizer's per-parameter updates, the foreach optimizers' op-by-op sweeps over all
// parameters) then still makes one chain per parameter, while work that only shares what it
// reads (calls of one function on the same input) stays apart. Open chains are independent, so
// they may be handed over in any order.
std::vector<std::unique_ptr<HeldChain>>& chains() {
  static auto* list = new std::vector<std::unique_ptr<HeldChain>>();
  return *list;
}

MemoryIndex& memory_index() {
  static auto* index = new MemoryIndex();
  return *index;
}
std::uint64_t g_touches = 0;    // ops held so far: the clock of HeldChain::touched
std::size_t g_held_steps = 0;   // ops in open chains, all streams
std::size_t g_held_bytes = 0;   // their results' bytes (HeldChain::result_bytes)

struct Entry {
  std::uint64_t id;
  std::int64_t hits = 0;
  enum State : std::uint8_t { kCold, kRequested, kReady, kFailed } state = kCold;
  std::shared_ptr<const RecordedProgram> program;
};
std::unordered_map<std::string, std::shared_ptr<Entry>>& entries() {
  static auto* map = new std::unordered_map<std::string, std::shared_ptr<Entry>>();
  return *map;
}
std::unordered_map<std::uint64_t, std::shared_ptr<Entry>>& entries_by_id() {
  static auto* map = new std::unordered_map<std::uint64_t, std::shared_ptr<Entry>>();
  return *map;
}
std::uint64_t g_next_id = 1;
Stats g_stats;
// Per signature without float values: how many signatures with values it had (kFloatVariants).
std::unordered_map<std::string, int>& float_variants() {
  static auto* map = new std::unordered_map<std::string, int>();
  return *map;
}

// Never destroyed: the compile thread waits on them until the process ends, and destroying a
// condition variable with a waiter blocks the exit (glibc).
std::mutex& g_requests_mutex = *new std::mutex();
std::condition_variable& g_requests_cv = *new std::condition_variable();
std::deque<Request>& requests() {
  static auto* queue = new std::deque<Request>();
  return *queue;
}

const bool g_fork_registered = [] {
  rt::hold_across_fork(g_mutex);
  rt::hold_across_fork(g_requests_mutex);
  return true;
}();

// Queues the chain's kernel calls as one item over its buffers: the chain's tensor inputs and
// runtime scalars (each a float64 the item holds), then its output buffers (in the order the
// calls were recorded over), then scratch memory the generated code uses, allocated by the
// worker for the item's length.
void enqueue_fused(const HeldChain& chain, const std::vector<ChainOutput>& outputs,
                   std::shared_ptr<const RecordedProgram> program) {
  std::vector<std::uintptr_t> pointers;
  // The buffers' memory until the kernels ran, but for the stream's own blocks, which the
  // allocator reuses in stream order (NeuronCachingAllocator::use_in_stream_order).
  std::vector<c10::Storage> keep;
  const rt::StreamClock* clock = launch::stream_clock(chain.stream);
  // (Collected into a compiled graph's item, which the clock does not count yet: all kept.)
  const bool collecting = launch::collecting();
  auto add = [&](const at::Tensor& t) {
    pointers.push_back(reinterpret_cast<std::uintptr_t>(t.data_ptr()));
    if (collecting ||
        !NeuronCachingAllocator::use_in_stream_order(t.storage(), chain.stream, clock)) {
      keep.push_back(t.storage());
    }
  };
  std::vector<double> numbers;         // the runtime scalars' values...
  std::vector<std::size_t> number_at;  // ... and where their pointers go
  for (const ChainInput& in : chain.inputs) {
    if (!in.scalar) {
      add(in.snapshot);
    } else if (in.runtime) {
      number_at.push_back(pointers.size());
      pointers.push_back(0);
      numbers.push_back(in.value.toDouble());
    }
  }
  for (const ChainOutput& o : outputs) {
    if (o.into_input < 0) add(o.buffer);
  }
  const c10::DeviceIndex device = chain.stream.device_index();
  launch::enqueue_held(chain.stream, "fused chain",
                     [program = std::move(program), pointers = std::move(pointers),
                      keep = std::move(keep), numbers = std::move(numbers),
                      number_at = std::move(number_at), device]() mutable {
                       profiler::KernelActivityScope activity("neuron::fused_chain", device);
                       for (std::size_t k = 0; k < numbers.size(); ++k) {
                         pointers[number_at[k]] = reinterpret_cast<std::uintptr_t>(&numbers[k]);
                       }
                       std::vector<c10::DataPtr> scratch;
                       const c10::Device d(c10::DeviceType::PrivateUse1, device);
                       for (std::size_t nbytes : program->scratch_nbytes) {
                         scratch.push_back(neuron_allocator().allocate_on(device, nbytes, d));
                         pointers.push_back(reinterpret_cast<std::uintptr_t>(scratch.back().get()));
                       }
                       std::vector<std::uintptr_t> args;
                       for (const RecordedCall& call : program->calls) {
                         args.resize(call.buffer.size());
                         for (std::size_t i = 0; i < args.size(); ++i) {
                           args[i] = call.buffer[i] >= 0 ? pointers[call.buffer[i]] + call.value[i]
                                                         : call.value[i];
                         }
                         call_recorded(call, args.data());
                       }
                     });
}

// The chain's entry (a new one the first time its signature is seen); nullptr when it is one more
// signature of a chain whose floats keep changing (kFloatVariants).
Entry* entry_of(const HeldChain& chain, const std::vector<ChainOutput>& outputs, int threads) {
  std::string key = signature_of(chain, outputs, threads, true);
  auto found = entries().find(key);
  if (found != entries().end()) return found->second.get();
  int& variants = float_variants()[signature_of(chain, outputs, threads, false)];
  if (variants >= kFloatVariants) return nullptr;
  ++variants;
  auto entry = std::make_shared<Entry>();
  entry->id = g_next_id++;
  entries_by_id()[entry->id] = entry;
  ++g_stats.signatures;
  return entries().emplace(std::move(key), std::move(entry)).first->second.get();
}

// Hands the chain over (under g_mutex); the caller's tensors it held go to `drop`, to be
// released after the lock (releasing one with a Python object takes the GIL).
void flush(HeldChain& chain, std::vector<at::Tensor>& drop) {
  const auto n = static_cast<std::int64_t>(chain.steps.size());
  if (n == 0) return;
  bool fused = false;
  if (n >= 2 && holding()) {
    ++g_stats.chains;
    std::vector<ChainOutput> outputs = outputs_of(chain);
    const int threads = at::get_num_threads();
    Entry* entry = entry_of(chain, outputs, threads);
    if (entry == nullptr) {
      ++g_stats.chains_varying;  // runs unfused, as async mode runs it
    } else if (entry->state == Entry::kReady) {
      enqueue_fused(chain, outputs, entry->program);
      fused = true;
      ++g_stats.chains_fused;
      g_stats.ops_fused += n;
      std::int64_t fresh = 0;
      for (const Identity& e : chain.identities) fresh += e.input < 0;
      std::int64_t written = 0;
      for (const ChainOutput& o : outputs) written += o.into_input < 0;
      g_stats.results_skipped += fresh - written;
    } else if (entry->state == Entry::kCold && ++entry->hits >= g_hot.load()) {
      entry->state = Entry::kRequested;
      ++g_stats.requested;
      {
        std::lock_guard<std::mutex> lock(g_requests_mutex);
        requests().push_back(request_of(chain, outputs, entry->id, threads));
      }
      g_requests_cv.notify_one();
    }
  }
  if (!fused) {
    const bool collecting = launch::collecting();
    for (HeldStep& step : chain.steps) {
      if (collecting) {
        // Collected into an item queued later (a compiled graph's ItemScope), which its stream's
        // clock does not count yet: the references go with the work, until it ran.
        step.work = [work = std::move(step.work), keep = std::move(step.keep)]() { work(); };
      }
      launch::enqueue_held(chain.stream, step.name, std::move(step.work));
    }
  }
  launch::add_held(-n);  // after the hand-over: the device never looks idle in between
  for (Identity& e : chain.identities) drop.push_back(std::move(e.caller));
  chain.steps.clear();
  chain.inputs.clear();
  chain.identities.clear();
}

// Hands the chain over; it stays open, empty.
void hand_over_only(HeldChain& chain, std::vector<at::Tensor>& drop) {
  for (const Identity& e : chain.identities) memory_index().remove(e, &chain);
  g_held_steps -= chain.steps.size();
  g_held_bytes -= chain.result_bytes;
  chain.result_bytes = 0;
  flush(chain, drop);
}

// Closes `chain`: removes it from the open chains (it holds nothing any more, or was absorbed).
void close_chain(HeldChain* chain) {
  auto& open = chains();
  open.erase(std::find_if(open.begin(), open.end(),
                          [&](const std::unique_ptr<HeldChain>& c) { return c.get() == chain; }));
}

// Hands `chain` over and closes it.
void hand_over(HeldChain* chain, std::vector<at::Tensor>& drop) {
  hand_over_only(*chain, drop);
  close_chain(chain);
}

void flush_held(const c10::Stream* stream) {
  std::vector<at::Tensor> drop;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& open = chains();
  for (auto& chain : open) {
    if (stream == nullptr || chain->stream == *stream) hand_over_only(*chain, drop);
  }
  open.erase(std::remove_if(open.begin(), open.end(),
                            [](const std::unique_ptr<HeldChain>& c) { return c->steps.empty(); }),
             open.end());
}

// Merges `from` into `into` (absorb, HeldChain.h) and closes `from`.
void merge_into(HeldChain& into, HeldChain* from) {
  absorb(into, *from, memory_index());
  close_chain(from);
}

// The open chain of `stream` the op joins: the one that wrote memory it reads or writes or read
// memory it writes, the merge of them when there are several; a new chain when there is none, or
// when the merge would pass kMaxSteps (they are then handed over). A chain of another stream
// whose memory it touches so is handed over to that stream (the program orders the two streams;
// holding it here would only delay its work).
HeldChain* chain_for(const c10::Stream& stream, const OpKind& kind, const c10::IValue* args,
                     std::size_t count, std::vector<at::Tensor>& drop) {
  MemoryIndex& index = memory_index();
  const std::size_t out = kind.out ? kind.functional->schema().arguments().size() : count;
  std::vector<HeldChain*> touched;
  auto touch = [&](HeldChain* chain) {
    if (chain->stream != stream) {
      hand_over(chain, drop);
    } else if (std::find(touched.begin(), touched.end(), chain) == touched.end()) {
      touched.push_back(chain);
    }
  };
  for (std::size_t i = 0; i < count; ++i) {
    if (!args[i].isTensor() || !is_neuron(args[i].toTensor()) ||
        !args[i].toTensor().has_storage()) {
      continue;
    }
    const c10::StorageImpl* storage = args[i].toTensor().storage().unsafeGetStorageImpl();
    auto w = index.writer.find(storage);
    if (w != index.writer.end()) touch(w->second);
    if ((kind.in_place && i == 0) || i == out) {
      auto r = index.readers.find(storage);
      if (r == index.readers.end()) continue;
      const auto readers = r->second;  // touch() may hand one over, which edits the list
      for (HeldChain* chain : readers) touch(chain);
    }
  }
  std::size_t steps = 1;
  for (HeldChain* c : touched) steps += c->steps.size();
  bool mergeable_all = true;
  for (std::size_t a = 0; a < touched.size() && mergeable_all; ++a) {
    for (std::size_t b = a + 1; b < touched.size() && mergeable_all; ++b) {
      mergeable_all = mergeable(*touched[a], *touched[b]);
    }
  }
  if (steps > kMaxSteps || !mergeable_all) {
    for (HeldChain* c : touched) hand_over(c, drop);
    touched.clear();
  }
  if (touched.empty()) return chains().emplace_back(std::make_unique<HeldChain>(stream)).get();
  // Merged in the order the chains were opened, into the oldest: a loop merges the same way
  // each iteration, so its signatures repeat.
  HeldChain* into = nullptr;
  std::vector<HeldChain*> merge;
  for (const auto& c : chains()) {
    if (std::find(touched.begin(), touched.end(), c.get()) == touched.end()) continue;
    if (into == nullptr) {
      into = c.get();
    } else {
      merge.push_back(c.get());
    }
  }
  for (HeldChain* c : merge) merge_into(*into, c);
  return into;
}

// Beyond kMaxHeldSteps or kMaxHeldBytes, hands over the least recently joined chains (not
// `keep`).
void bound_held(const HeldChain* keep, std::vector<at::Tensor>& drop) {
  while (g_held_steps > kMaxHeldSteps || g_held_bytes > kMaxHeldBytes) {
    HeldChain* oldest = nullptr;
    for (const auto& c : chains()) {
      if (c.get() != keep && (oldest == nullptr || c->touched < oldest->touched)) {
        oldest = c.get();
      }
    }
    if (oldest == nullptr) return;
    hand_over(oldest, drop);
  }
}

// Appends the op to `chain`, indexing the memory it brought in.
bool append_indexed(HeldChain& chain, const OpKind& kind, const char* name,
                    const c10::IValue* args, const torch::jit::Stack& snapshots,
                    const at::Tensor& result, std::function<void()>& work,
                    std::shared_ptr<void>& keep) {
  const std::size_t known = chain.identities.size();
  if (!append(chain, kind, name, args, snapshots, result, work, keep)) return false;
  for (std::size_t k = known; k < chain.identities.size(); ++k) {
    memory_index().add(chain.identities[k], &chain);
  }
  const int defines = chain.steps.back().identity;  // an input it wrote is the chain's now
  if (static_cast<std::size_t>(defines) < known) {
    memory_index().add(chain.identities[defines], &chain);
  }
  chain.touched = ++g_touches;
  ++g_held_steps;
  const std::size_t bytes = result.defined() ? result.nbytes() : 0;
  chain.result_bytes += bytes;
  g_held_bytes += bytes;
  return true;
}

}  // namespace

void configure(int hot) {
  g_hot.store(std::max(1, hot));
  launch::set_held_flush(&flush_held);
  static const OpHolder holder{&hold};
  set_op_holder(&holder);
}

bool holding() { return launch::effective_mode() == launch::EagerMode::kFused; }

bool hold(const c10::OperatorHandle& op, c10::DeviceIndex device, const c10::IValue* args,
          const torch::jit::Stack& snapshots, const at::Tensor& result,
          std::function<void()>& work, std::shared_ptr<void>& keep) {
  const OpKind& kind = kind_of(op);
  if (!kind.fusible) return false;
  const c10::Stream stream = launch::current_stream(device);
  std::vector<at::Tensor> drop;
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::size_t count = op.schema().arguments().size();
  HeldChain* chain = chain_for(stream, kind, args, count, drop);
  const char* name = op.schema().name().c_str();
  if (!append_indexed(*chain, kind, name, args, snapshots, result, work, keep)) {
    // It touches a held tensor's memory through another tensor (a view): after the chain, in a
    // chain of its own.
    if (chain->steps.empty()) {
      close_chain(chain);  // an op opened it and then could not join it
      return false;
    }
    hand_over(chain, drop);
    chain = chain_for(stream, kind, args, count, drop);
    if (!append_indexed(*chain, kind, name, args, snapshots, result, work, keep)) {
      close_chain(chain);  // an op opened it and then could not join it
      return false;
    }
  }
  launch::add_held(1);
  ++g_stats.ops_held;
  if (kind.reduction || chain->steps.size() >= kMaxSteps ||
      chain->result_bytes >= kMaxHeldBytes) {
    hand_over(chain, drop);
  } else {
    bound_held(chain, drop);
  }
  return true;
}

std::optional<Request> next_request(int timeout_ms) {
  std::unique_lock<std::mutex> lock(g_requests_mutex);
  auto ready = [] { return !requests().empty(); };
  if (timeout_ms < 0) {
    g_requests_cv.wait(lock, ready);
  } else if (!g_requests_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return std::nullopt;
  }
  Request r = std::move(requests().front());
  requests().pop_front();
  return r;
}

namespace {

void install(std::uint64_t id, RecordedProgram program) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = entries_by_id().find(id);
  if (it == entries_by_id().end()) return;  // forgotten by reset()
  it->second->program = std::make_shared<const RecordedProgram>(std::move(program));
  it->second->state = Entry::kReady;
  ++g_stats.ready;
}

}  // namespace

std::string install_recorded(std::uint64_t id, PyObject* call, PyObject* tensors) {
  std::string why;
  auto program = record_kernel_calls(call, tensors, why);
  if (!program) {
    fail(id, why);
    return why.empty() ? "its kernel calls could not be recorded" : why;
  }
  install(id, std::move(*program));
  return "";
}

void fail(std::uint64_t id, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = entries_by_id().find(id);
  if (it == entries_by_id().end()) return;
  it->second->state = Entry::kFailed;
  ++g_stats.failed;
  if (g_stats.failures.size() < 16) g_stats.failures.push_back(why);
}

Stats stats() {
  std::lock_guard<std::mutex> lock(g_mutex);
  Stats s = g_stats;
  s.held_now = static_cast<std::int64_t>(g_held_steps);
  return s;
}

void reset() {
  launch::settle();
  {
    std::lock_guard<std::mutex> lock(g_requests_mutex);
    requests().clear();
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  entries().clear();
  entries_by_id().clear();
  float_variants().clear();
  g_stats = Stats();
}

}  // namespace torchneuron::fused_eager
