// How the device executes work: synchronously on the calling thread (NEURON_EAGER_MODE=sync, or
// NEURON_LAUNCH_BLOCKING=1), or queued per stream and run by that stream's own worker thread
// (async), so that the call returns before the kernel ran, as on an accelerator.
//
// Rules every kernel follows (DESIGN.md, "Semantics decided"):
// - A kernel's output metadata is decided, and its memory allocated, at the call; only its data
//   is written later, by the stream's worker, in the order the calls were made on that stream.
// - Nothing on a calling thread reads or writes neuron memory while work is queued: every host
//   access first settles the device (csrc/aten/HostAccess.h), which makes it a synchronization
//   point.
// - An error raised by queued work is kept and re-raised, with its type and the op's name, at the
//   next synchronization point; later work still runs.
// - A worker runs with the intra-op thread count its caller had when it queued the work.
#pragma once

#include <c10/core/Stream.h>
#include <atomic>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace torchneuron::exec {

// How a waiting thread lets a worker finish: a worker may need Python's GIL (dropping the last
// reference to a tensor or storage that has a Python object), so the Python bindings install a
// wrapper that releases the GIL around a wait when the waiting thread holds it.
using WaitWrapper = void (*)(void (*wait)(void*), void* context);
void set_wait_wrapper(WaitWrapper wrapper);

// Set once, when the runtime is configured (torchneuron/runtime/config.py).
void configure(bool async, bool launch_blocking);
bool async_mode();       // NEURON_EAGER_MODE=async
bool launch_blocking();  // NEURON_LAUNCH_BLOCKING=1
// True when work issued on this thread should be queued: async mode, not launch-blocking, not
// on a device worker and not inside an InlineScope (nested work runs in place, in its order).
bool queuing();
bool on_worker_thread();

// For the length of a kernel that runs on the calling thread and dispatches neuron ops of its
// own (a native fast path running a CPU kernel on neuron tensors, whose copy_ or resize_ reach
// neuron kernels): those run in place too, in the kernel's order, never queued behind it.
class InlineScope {
 public:
  InlineScope();
  ~InlineScope();
  InlineScope(const InlineScope&) = delete;
  InlineScope& operator=(const InlineScope&) = delete;
};

// While open on a thread, the work that thread queues on one stream is collected into a single
// item of that stream, queued when the outermost scope closes (or earlier, when the thread
// synchronizes or turns to another stream): a compiled graph's kernels and extern ops reach
// the worker as one item, as a captured graph does on an accelerator. An error inside keeps
// the name of the piece that raised it; the pieces after it still run.
class ItemScope {
 public:
  ItemScope();
  ~ItemScope();
  ItemScope(const ItemScope&) = delete;
  ItemScope& operator=(const ItemScope&) = delete;
};

// True when no work is queued or running on any stream of any device (one atomic load).
bool idle();
// The largest operand (bytes) that runs on the calling thread when the device is idle in async
// mode: a small op then pays no hand-off to a worker (`x + y; x.sum().item()` stays cheap).
constexpr std::size_t kInlineBytes = 64 * 1024;
// True when an op whose largest operand has `bytes` bytes may run on the calling thread now:
// always when not queuing; when queuing, only small ops on an idle device with no work collected
// by an open ItemScope.
bool run_inline(std::size_t bytes);

// Fused mode holds queued ops back to fuse them (csrc/aten/FusedChain.h). The queue calls the
// holder's flush before anything that must come after held work: work queued on the stream, a
// marker, a synchronization or query (`stream` null: every stream).
using HeldFlush = void (*)(const c10::Stream* stream);
void set_held_flush(HeldFlush flush);
// Held ops count as pending work: the device is not idle (no op runs inline past them) and
// settle() flushes them and waits for them. `delta` ops were held (+) or handed over (-).
void add_held(std::int64_t delta);
// Queues work that was held back, in its place (without flushing held work again).
void enqueue_held(const c10::Stream& stream, const char* name, std::function<void()> work);
// Work this thread has queued, run inline or settled for so far: a compiled chain's kernel
// calls are recorded only when calling it did nothing else (csrc/compile/KernelLaunch.cpp).
std::uint64_t work_count();

// Queues `work` on `stream`. `name` (an op's name; must outlive the work) prefixes an error the
// work raises. The work holds what it captured until it ran; it is destroyed on the worker
// before the stream counts as drained. (A deferred op captures memory of its own stream without
// holding it, as an accelerator's queue does: see StreamClock.)
// When kMaxQueued items are queued (all streams), the calling thread first waits until the
// workers are down to kResumeQueued (outside Python's GIL), as a CUDA launch waits when the
// launch queue is full: a loop without a synchronization point stays a few steps ahead of the
// device instead of queueing without bound, each queued step holding its memory.
void enqueue(const c10::Stream& stream, const char* name, std::function<void()> work);
constexpr std::int64_t kMaxQueued = 1024;
constexpr std::int64_t kResumeQueued = 768;
// Items queued or running over all streams, not counting held ops (tests read it).
std::int64_t queued_items();
// The calling thread's current stream of `device`.
c10::Stream current_stream(c10::DeviceIndex device);

// Waits until the stream (every stream of the device; every device) has run its work, then
// raises the device's pending error, if any. Safe to call from any thread but a worker.
void synchronize_stream(const c10::Stream& stream);
void synchronize_device(c10::DeviceIndex device);
// Before the calling thread touches neuron memory: waits for all queued work of every device
// and raises a pending error. A no-op (one atomic load) when nothing is queued and no error is
// pending, and on a worker.
void settle();
bool query_stream(const c10::Stream& stream);
// Raises and clears `device`'s pending error from queued work, if any.
void raise_pending_error(c10::DeviceIndex device);

// How far a stream's worker got: the items queued on the stream and the items it finished (an
// item counts as finished once its work was destroyed). Memory that queued work uses without
// holding a reference to it is freed by the program at once, and the allocator hands it only to
// work queued later on the same stream (which runs after), or to anyone once the stream reached
// the position it had when the memory was freed (csrc/device/NeuronAllocator.h).
struct StreamClock {
  std::atomic<std::uint64_t> queued{0};
  std::atomic<std::uint64_t> finished{0};
  bool reached(std::uint64_t position) const {
    return finished.load(std::memory_order_acquire) >= position;
  }
};
// The clock of `stream`'s queue (made with the queue, never destroyed).
const StreamClock* stream_clock(const c10::Stream& stream);
// True while an ItemScope on this thread collects work (queued later, as one item: not yet
// counted by its stream's clock).
bool collecting();
// Waits until every stream of every device has run its work, without raising a pending error
// (the allocator's emptyCache). A no-op on a worker.
void drain_all();

// An event's position in a stream: complete once the stream's worker reached it.
class Marker {
 public:
  struct State;
  Marker() = default;
  explicit Marker(std::shared_ptr<State> state) : state_(std::move(state)) {}
  bool done() const;
  void wait() const;
  // The device clock when the stream reached the marker; waits for it.
  std::int64_t time_ns() const;
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  std::shared_ptr<State> state_;
};
// Records a marker at the current end of `stream` (complete at once when nothing is queued).
Marker record_marker(const c10::Stream& stream);
// Makes work queued on `stream` after this call wait until `marker` completed.
void wait_marker(const Marker& marker, const c10::Stream& stream);

}  // namespace torchneuron::exec
