// C++ tests of the runtime seam's execution (csrc/runtime/Execution.h: streams, markers, clocks,
// errors of queued work), built against nothing but the C++ standard library, as the seam
// itself. tests/runtime/test_seam.py compiles and runs this file; each failed check prints its
// line and the run exits 1.
#include "runtime/Execution.h"
#include "runtime/NeuronRuntime.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace torchneuron::rt;

namespace {

int g_failures = 0;
int g_checks = 0;

void check(bool ok, const char* what, int line) {
  ++g_checks;
  if (!ok) {
    std::printf("FAILED line %d: %s\n", line, what);
    ++g_failures;
  }
}
#define CHECK(cond) check((cond), #cond, __LINE__)

void spin_ms(int ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Work on one stream runs in the order it was queued, on a worker thread, after the call
// returned; synchronize waits for it.
void test_order_and_asynchrony() {
  const StreamRef s{0, 1};
  std::vector<int> seen;
  std::atomic<bool> started{false};
  enqueue(s, "spin", [&] {
    started = true;
    spin_ms(50);
  });
  for (int i = 0; i < 100; ++i) {
    enqueue(s, "append", [&seen, i] {
      CHECK(on_worker_thread());
      seen.push_back(i);
    });
  }
  CHECK(!idle());
  CHECK(seen.size() < 100);  // the call returned before the work ran
  synchronize_stream(s);
  CHECK(started.load());
  CHECK(seen.size() == 100);
  bool ordered = true;
  for (int i = 0; i < 100 && i < static_cast<int>(seen.size()); ++i) ordered &= seen[i] == i;
  CHECK(ordered);
  CHECK(idle());
  CHECK(query_stream(s));
  CHECK(!on_worker_thread());
}

// The first error of a device is kept and raised at the next synchronization, once; later
// work still runs; other devices are not affected.
void test_errors() {
  const StreamRef s{1, 0};
  std::atomic<int> ran{0};
  enqueue(s, "first", [] { throw std::runtime_error("boom 1"); });
  enqueue(s, "second", [] { throw std::runtime_error("boom 2"); });
  enqueue(s, "after", [&] { ++ran; });
  synchronize_device(0);  // another device: nothing raised
  bool raised = false;
  try {
    synchronize_stream(s);
  } catch (const std::runtime_error& e) {
    raised = true;
    CHECK(std::string(e.what()) == "boom 1");
  }
  CHECK(raised);
  CHECK(ran.load() == 1);
  CHECK(!error_pending());
  synchronize_device(1);  // raised once only
}

// A name hook renames errors; it is called inside the catch block.
void test_error_names() {
  ExecutionHooks hooks;
  hooks.name_error = [](const char* name) -> std::exception_ptr {
    try {
      throw;
    } catch (const std::exception& e) {
      return std::make_exception_ptr(std::runtime_error(std::string(name) + ": " + e.what()));
    }
  };
  set_execution_hooks(hooks);
  enqueue(StreamRef{0, 2}, "my_op", [] { throw std::runtime_error("bad"); });
  std::string message;
  try {
    synchronize_all();
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  CHECK(message == "my_op: bad");
  set_execution_hooks(ExecutionHooks{});
}

// Clocks count queued and finished items; a marker completes once its stream reached it, and a
// stream waiting on it runs later work only after that.
void test_clocks_and_markers() {
  const StreamRef a{0, 3}, b{0, 4};
  const StreamClock* clock = stream_clock(a);
  const auto before = clock->queued.load();
  std::atomic<bool> a_done{false};
  enqueue(a, "slow", [&] {
    spin_ms(30);
    a_done = true;
  });
  CHECK(clock->queued.load() == before + 1);
  Marker m = record_marker(a, /*may_queue=*/true);
  CHECK(!m.done());
  std::atomic<bool> b_saw_a{false};
  wait_marker(m, b);
  enqueue(b, "after marker", [&] { b_saw_a = a_done.load(); });
  synchronize_stream(b);
  CHECK(b_saw_a.load());
  CHECK(m.done());
  CHECK(m.time_ns() > 0);
  CHECK(clock->reached(before + 1));
  Marker now = record_marker(a, /*may_queue=*/false);
  CHECK(now.done());
}

// An open item collects work into one queued item, queued when it closes (or when the thread
// synchronizes); each piece's error keeps its own name.
void test_collected_item() {
  const StreamRef s{0, 5};
  synchronize_all();
  std::atomic<int> ran{0};
  open_item();
  CHECK(collecting());
  CHECK(collected_nothing());
  for (int i = 0; i < 10; ++i) submit(s, "piece", [&] { ++ran; });
  CHECK(!collected_nothing());
  CHECK(queued_items() == 0);  // nothing reached the stream yet
  close_item();
  CHECK(!collecting());
  synchronize_stream(s);
  CHECK(ran.load() == 10);
}

// Queued items never pass kMaxQueued: the launching thread waits for room.
void test_bounded_queue() {
  const StreamRef s{0, 6};
  std::atomic<std::int64_t> most{0};
  enqueue(s, "spin", [] { spin_ms(20); });
  for (int i = 0; i < 3000; ++i) {
    enqueue(s, "tiny", [] {});
    const std::int64_t n = queued_items();
    if (n > most.load()) most = n;
  }
  synchronize_all();
  CHECK(most.load() <= kMaxQueued);
  CHECK(most.load() >= kResumeQueued);
}

// A worker may not wait for a stream (it would wait for itself).
void test_worker_may_not_wait() {
  const StreamRef s{0, 7};
  enqueue(s, "waits", [] { synchronize_stream(StreamRef{0, 8}); });
  enqueue(StreamRef{0, 8}, "spin", [] { spin_ms(20); });
  bool raised = false;
  try {
    synchronize_all();
  } catch (const std::logic_error&) {
    raised = true;
  }
  CHECK(raised);
  drain();
  CHECK(idle());
}

// A thread that synchronizes a stream whose worker has not started its items runs them itself,
// in order, with the stream made current through the run_on_stream hook and marked as a worker;
// the worker takes over again afterwards. The worker of stream {0, 9} is held at its start, so
// every item is still unstarted when the caller synchronizes.
std::atomic<bool> g_release_worker{false};
std::atomic<int> g_streams_lent{0};

void test_waiting_thread_runs_unstarted_items() {
  ExecutionHooks hooks;
  hooks.worker_started = [](StreamRef s) {
    while (s.id == 9 && !g_release_worker.load()) std::this_thread::yield();
  };
  hooks.run_on_stream = [](StreamRef s, void (*run)(void*), void* context) {
    if (s.device == 0 && s.id == 9) g_streams_lent.fetch_add(1);
    run(context);
  };
  set_execution_hooks(hooks);
  const StreamRef s{0, 9};
  const auto caller = std::this_thread::get_id();
  std::vector<int> seen;
  std::atomic<int> on_caller{0};
  std::atomic<int> as_worker{0};
  for (int i = 0; i < 10; ++i) {
    enqueue(s, "append", [&, i] {
      seen.push_back(i);
      on_caller += std::this_thread::get_id() == caller;
      as_worker += on_worker_thread();
    });
  }
  enqueue(s, "fail", [] { throw std::runtime_error("kept"); });
  bool raised = false;
  try {
    synchronize_stream(s);
  } catch (const std::runtime_error&) {
    raised = true;
  }
  CHECK(raised);  // an item's error is kept and raised as the worker's would be
  CHECK(seen.size() == 10);
  bool ordered = true;
  for (int i = 0; i < 10 && i < static_cast<int>(seen.size()); ++i) ordered &= seen[i] == i;
  CHECK(ordered);
  CHECK(on_caller.load() == 10);
  CHECK(as_worker.load() == 10);
  CHECK(g_streams_lent.load() == 11);
  CHECK(!on_worker_thread());  // the caller is itself again
  CHECK(idle());

  g_release_worker = true;  // released, the worker runs what is queued next by itself
  std::atomic<bool> ran{false};
  std::thread::id ran_on;
  enqueue(s, "after", [&] {
    ran_on = std::this_thread::get_id();
    ran = true;
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ran.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  CHECK(ran.load());
  CHECK(ran_on != caller);
  synchronize_stream(s);
  set_execution_hooks(ExecutionHooks{});
}

// The seam declares queued execution.
void test_capabilities() {
  CHECK(capabilities().queued_execution);
  CHECK(capabilities().host_addressable_memory);
}

}  // namespace

int main() {
  test_order_and_asynchrony();
  test_errors();
  test_error_names();
  test_clocks_and_markers();
  test_collected_item();
  test_bounded_queue();
  test_worker_may_not_wait();
  test_waiting_thread_runs_unstarted_items();
  test_capabilities();
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
