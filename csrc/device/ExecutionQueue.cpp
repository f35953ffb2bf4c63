#include "device/ExecutionQueue.h"

#include "device/Lifecycle.h"
#include "profiler/KernelActivity.h"
#include "profiler/MemoryHistory.h"
#include "runtime/NeuronRuntime.h"

#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace torchneuron::exec {

struct Marker::State {
  c10::Stream stream;
  std::atomic<bool> done{false};
  std::int64_t time_ns = 0;
  std::mutex m;
  std::condition_variable cv;

  explicit State(c10::Stream s) : stream(s) {}
  void complete() {
    {
      std::lock_guard<std::mutex> lock(m);
      time_ns = rt::clock_ns();
      done.store(true);
    }
    cv.notify_all();
  }
};

namespace {

std::atomic<bool> g_async{false};
std::atomic<bool> g_blocking{false};
thread_local bool t_worker = false;
thread_local int t_inline_depth = 0;  // InlineScopes open on this thread
thread_local int t_item_depth = 0;    // ItemScopes open on this thread

// Items queued or running over all streams, and devices with a pending error: the two loads
// that make settle() free when the device is idle.
std::atomic<std::int64_t> g_pending{0};
std::atomic<int> g_error_count{0};
// Ops held back to fuse (included in g_pending) and the holder's flush.
std::atomic<std::int64_t> g_held{0};
std::atomic<HeldFlush> g_held_flush{nullptr};
thread_local std::uint64_t t_work_count = 0;

// Threads waiting in wait_for_room() for the workers to catch up.
std::mutex g_room_mutex;
std::condition_variable g_room;
std::atomic<int> g_room_waiters{0};

void flush_held(const c10::Stream* stream) {
  if (g_held.load(std::memory_order_acquire) == 0 || t_worker) return;
  if (HeldFlush flush = g_held_flush.load(std::memory_order_acquire)) flush(stream);
}

struct Item {
  const char* name = nullptr;
  std::function<void()> work;
  int threads = 1;
  std::uint64_t correlation = 0;  // the profiler's launching CPU op
};

struct StreamQueue {
  explicit StreamQueue(c10::Stream s) : stream(s) {}
  const c10::Stream stream;
  std::mutex m;
  std::condition_variable has_work;
  std::condition_variable drained;
  std::deque<Item> items;
  std::int64_t pending = 0;  // queued + running; guarded by m
  StreamClock clock;
};

std::mutex g_queues_mutex;
std::map<std::pair<int, c10::StreamId>, StreamQueue*>& queues() {
  static auto* map = new std::map<std::pair<int, c10::StreamId>, StreamQueue*>();
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

// The error with the op's name in front, of the original type where c10 has one (the Python
// binding maps each to its exception class: IndexError, ValueError, torch.OutOfMemoryError, ...).
template <typename E>
std::exception_ptr renamed(const E& e, const char* name) {
  return std::make_exception_ptr(E(c10::SourceLocation{__func__, __FILE__, __LINE__},
                                   std::string(name) + ": " + e.what_without_backtrace()));
}

std::exception_ptr current_error_named(const char* name) {
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    return renamed(e, name);
  } catch (const c10::IndexError& e) {
    return renamed(e, name);
  } catch (const c10::ValueError& e) {
    return renamed(e, name);
  } catch (const c10::TypeError& e) {
    return renamed(e, name);
  } catch (const c10::NotImplementedError& e) {
    return renamed(e, name);
  } catch (const c10::LinAlgError& e) {
    return renamed(e, name);
  } catch (const c10::Error& e) {
    return renamed(e, name);
  } catch (const std::bad_alloc&) {
    return std::make_exception_ptr(c10::OutOfMemoryError(
        c10::SourceLocation{__func__, __FILE__, __LINE__}, std::string(name) + ": out of memory"));
  } catch (const std::exception& e) {
    return std::make_exception_ptr(
        c10::Error(c10::SourceLocation{__func__, __FILE__, __LINE__},
                   std::string(name) + ": " + e.what()));
  } catch (...) {
    return std::make_exception_ptr(c10::Error(c10::SourceLocation{__func__, __FILE__, __LINE__},
                                              std::string(name) + ": unknown error"));
  }
}

// The first error of a device is kept until a synchronization point raises it; later ones are
// dropped, as an accelerator reports the first failure.
void keep_error(c10::DeviceIndex device, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  if (!g_errors[device]) {
    g_errors[device] = std::move(error);
    g_error_count.fetch_add(1);
  }
}

// The work an open ItemScope collected on this thread: pieces of one stream, in call order.
struct Piece {
  const char* name;
  std::function<void()> work;
};
struct CollectedItem {
  c10::Stream stream{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, 0)};
  std::vector<Piece> pieces;
};
thread_local CollectedItem t_collected;

void enqueue_now(const c10::Stream& stream, const char* name, std::function<void()> work);

// Queues what this thread's ItemScope collected as one item (before anything that must come
// after it: a synchronization, a marker, work on another stream, the scope's end).
void flush_collected() {
  if (t_collected.pieces.empty()) return;
  auto pieces = std::make_shared<std::vector<Piece>>(std::move(t_collected.pieces));
  t_collected.pieces.clear();
  const c10::DeviceIndex device = t_collected.stream.device_index();
  enqueue_now(t_collected.stream, "compiled graph", [pieces, device] {
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

void run_worker(StreamQueue* q) {
  t_worker = true;
  profiler::record_no_python_frames_on_this_thread();
  // The worker's own current device and stream, which kernels and profiler records read.
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  impl->setDevice(q->stream.device());
  impl->exchangeStream(q->stream);
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(q->m);
      q->has_work.wait(lock, [q] { return !q->items.empty(); });
      item = std::move(q->items.front());
      q->items.pop_front();
    }
    if (at::get_num_threads() != item.threads) at::set_num_threads(item.threads);
    profiler::push_correlation(item.correlation);
    try {
      item.work();
    } catch (...) {
      keep_error(q->stream.device_index(), current_error_named(item.name));
    }
    profiler::pop_correlation();
    item.work = nullptr;  // frees what the work held before the stream counts as drained
    q->clock.finished.fetch_add(1, std::memory_order_release);
    {
      std::lock_guard<std::mutex> lock(q->m);
      g_pending.fetch_sub(1);  // before a waiter can see the stream drained
      if (--q->pending == 0) q->drained.notify_all();
    }
    if (g_room_waiters.load(std::memory_order_acquire) > 0 && queued_items() <= kResumeQueued) {
      std::lock_guard<std::mutex> lock(g_room_mutex);  // a waiter is waiting or sees the count
      g_room.notify_all();
    }
  }
}

StreamQueue* find_queue(const c10::Stream& stream) {
  std::lock_guard<std::mutex> lock(g_queues_mutex);
  auto it = queues().find({stream.device_index(), stream.id()});
  return it == queues().end() ? nullptr : it->second;
}

StreamQueue* queue_for(const c10::Stream& stream) {
  std::lock_guard<std::mutex> lock(g_queues_mutex);
  auto& slot = queues()[{stream.device_index(), stream.id()}];
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

std::atomic<WaitWrapper> g_wait_wrapper{nullptr};

// Runs `wait` through the installed wrapper (which releases the GIL if this thread holds it).
template <typename Wait>
void wait_outside_python(Wait&& wait) {
  WaitWrapper wrapper = g_wait_wrapper.load(std::memory_order_acquire);
  if (wrapper == nullptr) return wait();
  wrapper([](void* ctx) { (*static_cast<Wait*>(ctx))(); }, &wait);
}

// Waits while kMaxQueued items are queued (see enqueue()). Not on a worker (it would wait for
// itself).
void wait_for_room() {
  if (t_worker || queued_items() < kMaxQueued) return;
  g_room_waiters.fetch_add(1);
  wait_outside_python([] {
    std::unique_lock<std::mutex> lock(g_room_mutex);
    g_room.wait(lock, [] { return queued_items() <= kResumeQueued; });
  });
  g_room_waiters.fetch_sub(1);
}

void wait_drained(StreamQueue* q) {
  TORCH_CHECK(!t_worker, "neuron: a device worker may not wait for a stream");
  {
    std::lock_guard<std::mutex> lock(q->m);
    if (q->pending == 0) return;
  }
  wait_outside_python([q] {
    std::unique_lock<std::mutex> lock(q->m);
    q->drained.wait(lock, [q] { return q->pending == 0; });
  });
}

}  // namespace

void set_wait_wrapper(WaitWrapper wrapper) { g_wait_wrapper.store(wrapper); }

void configure(bool async, bool blocking) {
  g_async.store(async);
  g_blocking.store(blocking);
}

bool async_mode() { return g_async.load(std::memory_order_relaxed); }
bool launch_blocking() { return g_blocking.load(std::memory_order_relaxed); }
bool on_worker_thread() { return t_worker; }

bool queuing() {
  return g_async.load(std::memory_order_relaxed) && !g_blocking.load(std::memory_order_relaxed) &&
         !t_worker && t_inline_depth == 0;
}

InlineScope::InlineScope() { ++t_inline_depth; }
InlineScope::~InlineScope() { --t_inline_depth; }

ItemScope::ItemScope() { ++t_item_depth; }
ItemScope::~ItemScope() {
  if (--t_item_depth == 0) flush_collected();
}

bool idle() { return g_pending.load(std::memory_order_acquire) == 0; }

bool collecting() { return t_item_depth > 0 && !t_worker; }

const StreamClock* stream_clock(const c10::Stream& stream) {
  // The last stream asked for on this thread, remembered: a deferred op asks once per call.
  thread_local std::pair<int, c10::StreamId> last_key{-1, 0};
  thread_local const StreamClock* last = nullptr;
  const std::pair<int, c10::StreamId> key{stream.device_index(), stream.id()};
  if (last == nullptr || key != last_key) {
    last = &queue_for(stream)->clock;
    last_key = key;
  }
  return last;
}

void drain_all() {
  if (t_worker) return;
  for (StreamQueue* q : queues_of(-1)) wait_drained(q);
}

std::int64_t queued_items() {
  return g_pending.load(std::memory_order_acquire) - g_held.load(std::memory_order_acquire);
}

bool run_inline(std::size_t bytes) {
  const bool now = !queuing() || (bytes <= kInlineBytes && idle() && t_collected.pieces.empty());
  t_work_count += now;
  return now;
}

void set_held_flush(HeldFlush flush) { g_held_flush.store(flush); }

void add_held(std::int64_t delta) {
  g_held.fetch_add(delta);
  g_pending.fetch_add(delta);
}

std::uint64_t work_count() { return t_work_count; }

c10::Stream current_stream(c10::DeviceIndex device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  return impl->getStream(c10::Device(c10::DeviceType::PrivateUse1, device));
}

void enqueue(const c10::Stream& stream, const char* name, std::function<void()> work) {
  wait_for_room();
  flush_held(&stream);
  enqueue_held(stream, name, std::move(work));
}

void enqueue_held(const c10::Stream& stream, const char* name, std::function<void()> work) {
  ++t_work_count;
  if (t_item_depth > 0 && !t_worker) {
    if (!t_collected.pieces.empty() && t_collected.stream != stream) flush_collected();
    t_collected.stream = stream;
    t_collected.pieces.push_back(Piece{name, std::move(work)});
    return;
  }
  enqueue_now(stream, name, std::move(work));
}

namespace {
void enqueue_now(const c10::Stream& stream, const char* name, std::function<void()> work) {
  StreamQueue* q = queue_for(stream);
  Item item{name, std::move(work), at::get_num_threads(), profiler::current_correlation()};
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

void raise_pending_error(c10::DeviceIndex device) {
  if (g_error_count.load(std::memory_order_acquire) == 0) return;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(g_error_mutex);
    error = std::exchange(g_errors[device], nullptr);
    if (error) g_error_count.fetch_sub(1);
  }
  if (error) std::rethrow_exception(error);
}

void synchronize_stream(const c10::Stream& stream) {
  flush_held(&stream);
  flush_collected();
  if (StreamQueue* q = find_queue(stream)) wait_drained(q);
  raise_pending_error(stream.device_index());
}

void synchronize_device(c10::DeviceIndex device) {
  flush_held(nullptr);
  flush_collected();
  for (StreamQueue* q : queues_of(device)) wait_drained(q);
  raise_pending_error(device);
}

void settle() {
  if (t_worker) return;
  ++t_work_count;
  flush_held(nullptr);
  flush_collected();
  if (g_pending.load(std::memory_order_acquire) == 0 &&
      g_error_count.load(std::memory_order_acquire) == 0) {
    return;
  }
  for (StreamQueue* q : queues_of(-1)) wait_drained(q);
  for (int d = 0; d < kMaxDevices && g_error_count.load() > 0; ++d) {
    raise_pending_error(static_cast<c10::DeviceIndex>(d));
  }
}

bool query_stream(const c10::Stream& stream) {
  flush_held(&stream);
  flush_collected();
  StreamQueue* q = find_queue(stream);
  if (q == nullptr) return true;
  std::lock_guard<std::mutex> lock(q->m);
  return q->pending == 0;
}

bool Marker::done() const { return !state_ || state_->done.load(); }

void Marker::wait() const {
  if (!state_ || state_->done.load()) return;
  TORCH_CHECK(!t_worker, "neuron: a device worker may not wait for an event");
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

Marker record_marker(const c10::Stream& stream) {
  flush_held(&stream);
  flush_collected();
  auto state = std::make_shared<Marker::State>(stream);
  StreamQueue* q = queuing() ? find_queue(stream) : nullptr;
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

void wait_marker(const Marker& marker, const c10::Stream& stream) {
  const auto& state = marker.state();
  if (!state || state->done.load()) return;
  if (state->stream == stream) return;  // a stream runs its own work in order
  enqueue(stream, "stream wait event", [state] {
    std::unique_lock<std::mutex> lock(state->m);
    state->cv.wait(lock, [&] { return state->done.load(); });
  });
}

}  // namespace torchneuron::exec
