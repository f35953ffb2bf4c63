// The software NeuronCore's streams: one queue and one worker thread per stream, created at the
// stream's first use and alive until the process ends.
#include "runtime/Execution.h"

#include "runtime/ForkSafety.h"
#include "runtime/NeuronRuntime.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace torchneuron::rt {

struct Marker::State {
  StreamRef stream;
  std::atomic<bool> done{false};
  std::int64_t time_ns = 0;
  std::mutex m;
  std::condition_variable cv;

  explicit State(StreamRef s) : stream(s) {}
  void complete() {
    {
      std::lock_guard<std::mutex> lock(m);
      time_ns = clock_ns();
      done.store(true);
    }
    cv.notify_all();
  }
};

namespace {

thread_local bool t_worker = false;
thread_local int t_item_depth = 0;  // items open on this thread

// Items queued or running over all streams, and devices with a kept error: the two loads that
// make a synchronization free when the device is idle.
std::atomic<std::int64_t> g_pending{0};
std::atomic<int> g_error_count{0};

// How long a waiting thread polls a stream before it sleeps (wait_drained).
constexpr std::chrono::microseconds kSpinBeforeSleep{200};

ExecutionHooks g_hooks;  // set once, before any work is queued
std::atomic<WaitWrapper> g_wait_wrapper{nullptr};

// Threads waiting in wait_for_room() for the workers to catch up.
std::mutex g_room_mutex;
std::condition_variable g_room;
std::atomic<int> g_room_waiters{0};

struct Item {
  const char* name = nullptr;
  std::function<void()> work;
  LaunchContext context;
};

struct StreamQueue {
  explicit StreamQueue(StreamRef s) : stream(s) {}
  const StreamRef stream;
  std::mutex m;
  std::condition_variable has_work;
  std::condition_variable drained;
  std::deque<Item> items;
  std::int64_t pending = 0;  // queued + running; guarded by m
  // An item of this stream is running, on its worker or on a thread that waits for the stream
  // (run_waiting): items start one at a time, in order. Guarded by m.
  bool running = false;
  StreamClock clock;
};

std::mutex g_queues_mutex;
std::map<std::pair<int, std::int64_t>, StreamQueue*>& queues() {
  static auto* map = new std::map<std::pair<int, std::int64_t>, StreamQueue*>();
  return *map;  // never destroyed: workers live until the process ends
}

constexpr int kMaxDevices = 64;
std::mutex g_error_mutex;
std::array<std::exception_ptr, kMaxDevices> g_errors;

const bool g_fork_registered = [] {
  hold_across_fork(g_queues_mutex);
  hold_across_fork(g_error_mutex);
  hold_across_fork(g_room_mutex);
  return true;
}();

void check_device_index(int device) {
  if (device < 0 || device >= kMaxDevices) {
    throw std::out_of_range("neuron runtime: device index " + std::to_string(device) +
                            " is out of range");
  }
}

// Inside a catch block: the error to keep.
std::exception_ptr current_error_named(const char* name) {
  if (g_hooks.name_error != nullptr) return g_hooks.name_error(name);
  return std::current_exception();
}

// The first error of a device is kept until a synchronization raises it; later ones are
// dropped, as an accelerator reports the first failure.
void keep_error(int device, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  if (!g_errors[device]) {
    g_errors[device] = std::move(error);
    g_error_count.fetch_add(1);
  }
}

// The work an open item collected on this thread: pieces of one stream, in call order.
struct Piece {
  const char* name;
  std::function<void()> work;
};
struct CollectedItem {
  StreamRef stream;
  std::vector<Piece> pieces;
};
thread_local CollectedItem t_collected;

void queue_now(StreamRef stream, const char* name, std::function<void()> work);

// Runs one item taken from `q` (q->running set by the taker) and counts it finished.
void run_item(StreamQueue* q, Item& item) {
  if (g_hooks.enter != nullptr) g_hooks.enter(item.context);
  try {
    item.work();
  } catch (...) {
    keep_error(q->stream.device, current_error_named(item.name));
  }
  if (g_hooks.leave != nullptr) g_hooks.leave();
  item.work = nullptr;  // frees what the work held before the stream counts as drained
  q->clock.finished.fetch_add(1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(q->m);
    q->running = false;
    g_pending.fetch_sub(1);  // before a waiter can see the stream drained
    if (--q->pending == 0) {
      q->drained.notify_all();
    } else if (!q->items.empty()) {
      q->has_work.notify_one();  // the worker may have slept while a waiting thread ran items
    }
  }
  if (g_room_waiters.load(std::memory_order_acquire) > 0 && queued_items() <= kResumeQueued) {
    std::lock_guard<std::mutex> lock(g_room_mutex);  // a waiter is waiting or sees the count
    g_room.notify_all();
  }
}

void run_worker(StreamQueue* q) {
  t_worker = true;
  if (g_hooks.worker_started != nullptr) g_hooks.worker_started(q->stream);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(q->m);
      q->has_work.wait(lock, [q] { return !q->items.empty() && !q->running; });
      item = std::move(q->items.front());
      q->items.pop_front();
      q->running = true;
    }
    run_item(q, item);
  }
}

StreamQueue* find_queue(StreamRef stream) {
  std::lock_guard<std::mutex> lock(g_queues_mutex);
  auto it = queues().find({stream.device, stream.id});
  return it == queues().end() ? nullptr : it->second;
}

StreamQueue* queue_for(StreamRef stream) {
  check_device_index(stream.device);
  std::lock_guard<std::mutex> lock(g_queues_mutex);
  auto& slot = queues()[{stream.device, stream.id}];
  if (slot == nullptr) {
    slot = new StreamQueue(stream);
    hold_across_fork(slot->m);
    std::thread(run_worker, slot).detach();
  }
  return slot;
}

std::vector<StreamQueue*> queues_of(int device) {  // device < 0: all
  std::lock_guard<std::mutex> lock(g_queues_mutex);
  std::vector<StreamQueue*> out;
  for (const auto& [key, q] : queues()) {
    if (device < 0 || key.first == device) out.push_back(q);
  }
  return out;
}

// Runs `wait` through the installed wrapper (which releases the GIL if this thread holds it).
template <typename Wait>
void wait_outside_python(Wait&& wait) {
  WaitWrapper wrapper = g_wait_wrapper.load(std::memory_order_acquire);
  if (wrapper == nullptr) return wait();
  wrapper([](void* ctx) { (*static_cast<Wait*>(ctx))(); }, &wait);
}

// A thread that must wait for a stream first runs the items the stream's worker has not
// started, in order, as the worker would (the stream current, marked as a worker so nothing
// inside waits): a caller that is going to sleep until the device is done pays no hand-over
// to the worker and back. It stops taking items once the worker is running one.
void run_waiting(StreamQueue* q) {
  for (;;) {
    Item item;
    {
      std::lock_guard<std::mutex> lock(q->m);
      if (q->running || q->items.empty()) return;
      item = std::move(q->items.front());
      q->items.pop_front();
      q->running = true;
    }
    struct Context {
      StreamQueue* q;
      Item* item;
    } context{q, &item};
    auto run = [](void* ctx) {
      auto* c = static_cast<Context*>(ctx);
      run_item(c->q, *c->item);
    };
    struct AsWorker {  // restored however the item ends
      bool was = std::exchange(t_worker, true);
      ~AsWorker() { t_worker = was; }
    } as_worker;
    if (g_hooks.run_on_stream != nullptr) {
      g_hooks.run_on_stream(q->stream, run, &context);
    } else {
      run(&context);
    }
  }
}

// `run_items`: take unstarted items (false at exit, when running them on this thread could
// need an interpreter that is shutting down).
void wait_drained(StreamQueue* q, bool run_items = true) {
  if (t_worker) throw std::logic_error("neuron: a device worker may not wait for a stream");
  {
    std::lock_guard<std::mutex> lock(q->m);
    if (q->pending == 0) return;
  }
  wait_outside_python([q, run_items] {
    if (run_items) run_waiting(q);
    // Then, as an accelerator's driver spins before it blocks, poll for a short while: the
    // worker is usually finishing an item that takes tens of microseconds, and a thread put to
    // sleep on the condition variable pays a wake-up about as long. Yielding while it polls
    // leaves the core to other threads on a busy host.
    const auto until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(q->m);
        if (q->pending == 0) return;
      }
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(q->m);
    q->drained.wait(lock, [q] { return q->pending == 0; });
  });
}

void queue_now(StreamRef stream, const char* name, std::function<void()> work) {
  StreamQueue* q = queue_for(stream);
  Item item{name, std::move(work), g_hooks.capture != nullptr ? g_hooks.capture() : LaunchContext{}};
  g_pending.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(q->m);
    q->items.push_back(std::move(item));
    ++q->pending;
    q->clock.queued.fetch_add(1, std::memory_order_release);
  }
  q->has_work.notify_one();
}

}  // namespace

void set_execution_hooks(const ExecutionHooks& hooks) { g_hooks = hooks; }
void set_wait_wrapper(WaitWrapper wrapper) { g_wait_wrapper.store(wrapper); }

std::int64_t queued_items() { return g_pending.load(std::memory_order_acquire); }
bool idle() { return g_pending.load(std::memory_order_acquire) == 0; }
bool on_worker_thread() { return t_worker; }

void wait_for_room() {
  if (t_worker || queued_items() < kMaxQueued) return;
  g_room_waiters.fetch_add(1);
  wait_outside_python([] {
    std::unique_lock<std::mutex> lock(g_room_mutex);
    g_room.wait(lock, [] { return queued_items() <= kResumeQueued; });
  });
  g_room_waiters.fetch_sub(1);
}

void enqueue(StreamRef stream, const char* name, std::function<void()> work) {
  wait_for_room();
  submit(stream, name, std::move(work));
}

void submit(StreamRef stream, const char* name, std::function<void()> work) {
  if (collecting()) {
    if (!t_collected.pieces.empty() && t_collected.stream != stream) flush_collected();
    t_collected.stream = stream;
    t_collected.pieces.push_back(Piece{name, std::move(work)});
    return;
  }
  queue_now(stream, name, std::move(work));
}

void open_item() { ++t_item_depth; }
void close_item() {
  if (--t_item_depth == 0) flush_collected();
}
bool collecting() { return t_item_depth > 0 && !t_worker; }
bool collected_nothing() { return t_collected.pieces.empty(); }

void flush_collected() {
  if (t_collected.pieces.empty()) return;
  auto pieces = std::make_shared<std::vector<Piece>>(std::move(t_collected.pieces));
  t_collected.pieces.clear();
  const int device = t_collected.stream.device;
  queue_now(t_collected.stream, "compiled graph", [pieces, device] {
    for (Piece& piece : *pieces) {
      try {
        piece.work();
      } catch (...) {
        keep_error(device, current_error_named(piece.name));
      }
      piece.work = nullptr;  // what the piece held is freed as soon as it ran
    }
  });
}

const StreamClock* stream_clock(StreamRef stream) {
  // The last stream asked for on this thread, remembered: a queued op asks once per call.
  thread_local StreamRef last_stream{-1, 0};
  thread_local const StreamClock* last = nullptr;
  if (last == nullptr || stream != last_stream) {
    last = &queue_for(stream)->clock;
    last_stream = stream;
  }
  return last;
}

bool error_pending() { return g_error_count.load(std::memory_order_acquire) > 0; }

void raise_pending_error(int device) {
  if (!error_pending()) return;
  check_device_index(device);
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    error = std::exchange(g_errors[device], nullptr);
    if (error) g_error_count.fetch_sub(1);
  }
  if (error) std::rethrow_exception(error);
}

void synchronize_stream(StreamRef stream) {
  flush_collected();
  if (StreamQueue* q = find_queue(stream)) wait_drained(q);
  raise_pending_error(stream.device);
}

void synchronize_device(int device) {
  check_device_index(device);
  flush_collected();
  for (StreamQueue* q : queues_of(device)) wait_drained(q);
  raise_pending_error(device);
}

void synchronize_all() {
  // The common case first, cheapest: nothing queued, collected or kept (every host access asks).
  if (idle() && !error_pending() && t_collected.pieces.empty()) return;
  if (t_worker) return;
  flush_collected();
  if (idle() && !error_pending()) return;
  for (StreamQueue* q : queues_of(-1)) wait_drained(q);
  for (int d = 0; d < kMaxDevices && error_pending(); ++d) raise_pending_error(d);
}

void drain() {
  if (t_worker) return;
  for (StreamQueue* q : queues_of(-1)) wait_drained(q, /*run_items=*/false);
}

bool query_stream(StreamRef stream) {
  flush_collected();
  StreamQueue* q = find_queue(stream);
  if (q == nullptr) return true;
  std::lock_guard<std::mutex> lock(q->m);
  return q->pending == 0;
}

bool Marker::done() const { return !state_ || state_->done.load(); }

void Marker::wait() const {
  if (!state_ || state_->done.load()) return;
  if (t_worker) throw std::logic_error("neuron: a device worker may not wait for an event");
  wait_outside_python([this] {
    std::unique_lock<std::mutex> lock(state_->m);
    state_->cv.wait(lock, [this] { return state_->done.load(); });
  });
}

std::int64_t Marker::time_ns() const {
  wait();
  if (!state_) return 0;
  std::lock_guard<std::mutex> lock(state_->m);
  return state_->time_ns;
}

Marker record_marker(StreamRef stream, bool may_queue) {
  flush_collected();
  auto state = std::make_shared<Marker::State>(stream);
  StreamQueue* q = may_queue ? find_queue(stream) : nullptr;
  bool queued = false;
  if (q != nullptr) {
    std::lock_guard<std::mutex> lock(q->m);
    queued = q->pending > 0;
  }
  if (queued) {
    enqueue(stream, "event record", [state] { state->complete(); });
  } else {
    state->complete();
  }
  return Marker(std::move(state));
}

void wait_marker(const Marker& marker, StreamRef stream) {
  const auto& state = marker.state();
  if (!state || state->done.load()) return;
  if (state->stream == stream) return;  // a stream runs its own work in order
  enqueue(stream, "stream wait event", [state] {
    std::unique_lock<std::mutex> lock(state->m);
    state->cv.wait(lock, [&] { return state->done.load(); });
  });
}

}  // namespace torchneuron::rt
