// Execution on a NeuronCore, as an accelerator's driver offers it: streams are queues of work
// items, each run in order by the stream's own worker; markers (events) stand at a position of
// a stream; the first error an item raises is kept per device and raised at the next
// synchronization. The software NeuronCore implements this on host threads (Execution.cpp); a
// hardware runtime would implement it on the chip's queues.
//
// Plain C++ (the standard library only), like the rest of the seam: the layer above
// (csrc/aten/Launch.h) decides what runs now and what is queued, and installs the few hooks that
// need PyTorch (the worker's current device, the caller's thread count, error types, the GIL).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>

namespace torchneuron::rt {

// A stream of a device: `id` is the layer above's stream id (c10::StreamId for PyTorch).
struct StreamRef {
  int device = 0;
  std::int64_t id = 0;
  bool operator==(const StreamRef& o) const { return device == o.device && id == o.id; }
  bool operator!=(const StreamRef& o) const { return !(*this == o); }
};

// What the launching thread hands its work besides the work itself: the host threads a
// software kernel may use, and the profiler's id of the op that launched it.
struct LaunchContext {
  int host_threads = 1;
  std::uint64_t correlation = 0;
};

// Installed once by the layer above; every hook may be left null.
struct ExecutionHooks {
  // On a stream's worker thread, before its first item: `stream` becomes current there.
  void (*worker_started)(StreamRef stream) = nullptr;
  // On the launching thread, when work is queued.
  LaunchContext (*capture)() = nullptr;
  // On the worker, before and after each item.
  void (*enter)(const LaunchContext& context) = nullptr;
  void (*leave)() = nullptr;
  // On a thread that waits for `stream` and runs its unstarted items itself: calls
  // run(context) with `stream` current on this thread, then restores what was current.
  void (*run_on_stream)(StreamRef stream, void (*run)(void*), void* context) = nullptr;
  // Called inside the catch block of an item that raised: the error to keep, with the item's
  // name in front (default: the error as raised).
  std::exception_ptr (*name_error)(const char* name) = nullptr;
};
void set_execution_hooks(const ExecutionHooks& hooks);

// How a waiting thread lets a worker finish: a worker may need a lock the waiting thread holds
// (Python's GIL), so the bindings install a wrapper that releases it around every wait.
using WaitWrapper = void (*)(void (*wait)(void*), void* context);
void set_wait_wrapper(WaitWrapper wrapper);

// Queues `work` on `stream` (`name` must outlive the work: it names the work's error). The
// work holds what it captured until it ran, and is destroyed on the worker before the stream
// counts as drained. When kMaxQueued items are queued (all streams), the calling thread first
// waits until the workers are down to kResumeQueued, as a launch waits on a full launch queue:
// a loop without a synchronization point stays a few steps ahead of the device. A worker never
// waits for room.
void enqueue(StreamRef stream, const char* name, std::function<void()> work);
constexpr std::int64_t kMaxQueued = 1024;
constexpr std::int64_t kResumeQueued = 768;
// The wait of enqueue() alone, and enqueue() without it (work that must go in now, in its place).
void wait_for_room();
void submit(StreamRef stream, const char* name, std::function<void()> work);

// Items queued or running over all streams.
std::int64_t queued_items();
// No item queued or running on any stream (one atomic load).
bool idle();
bool on_worker_thread();

// While an item is open on a thread (nested opens count), the work it submits is collected
// into one item of one stream, queued when the outermost closes, or before anything that must
// come after it (a synchronization, a marker, work on another stream): a compiled graph's
// kernels reach the worker as one item, as a captured graph does. Each piece's error keeps its
// own name; the pieces after it still run.
void open_item();
void close_item();
bool collecting();          // an item is open on this thread (never on a worker)
bool collected_nothing();   // ... and nothing was submitted into it yet (true when none is open)
void flush_collected();     // queues what this thread collected so far

// How far a stream's worker got: the items queued on the stream and those it finished (an item
// counts as finished once its work was destroyed). Memory that queued work uses without holding
// it may be handed to later work of the same stream at once, and to anyone once the stream
// reached the position it had when the memory was freed (the caching allocator's stream order).
struct StreamClock {
  std::atomic<std::uint64_t> queued{0};
  std::atomic<std::uint64_t> finished{0};
  bool reached(std::uint64_t position) const {
    return finished.load(std::memory_order_acquire) >= position;
  }
};
// The clock of `stream` (made with its queue, never destroyed).
const StreamClock* stream_clock(StreamRef stream);

// Waits until the stream (every stream of the device; every stream) ran its work, then raises
// the device's kept error, if any (every device's, for the last). Not on a worker. The waiting
// thread first runs, in order, the items the stream's worker has not started (a caller about
// to sleep until the device is done pays no hand-over to the worker and back). A device index
// out of range raises std::out_of_range. The one entry point to synchronize a device.
void synchronize_stream(StreamRef stream);
void synchronize_device(int device);
void synchronize_all();
// Waits for every stream without raising (releasing memory, at exit). A no-op on a worker.
void drain();
// True when the stream has nothing queued or running.
bool query_stream(StreamRef stream);
// Raises and clears `device`'s kept error, if any (one atomic load when there is none).
void raise_pending_error(int device);
bool error_pending();

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
// Records a marker at the current end of `stream`: complete at once when nothing is queued
// there, or when `may_queue` is false (the caller runs its work in place).
Marker record_marker(StreamRef stream, bool may_queue);
// Makes work queued on `stream` after this call wait until `marker` completed.
void wait_marker(const Marker& marker, StreamRef stream);

}  // namespace torchneuron::rt
