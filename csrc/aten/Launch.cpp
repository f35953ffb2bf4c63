#include "aten/Launch.h"

#include "aten/Accounting.h"
#include "aten/GraphCapture.h"

#include "profiler/KernelActivity.h"
#include "profiler/MemoryHistory.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/ProtectedMemory.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>

namespace torchneuron::launch {
namespace {

// One value: the configured mode (the default until configure() runs: the configuration's).
std::atomic<EagerMode> g_mode{EagerMode::kAsync};
std::atomic<bool> g_blocking{false};
thread_local int t_inline_depth = 0;  // InlineScopes open on this thread
// Ops held back to fuse, and the holder's flush.
std::atomic<std::int64_t> g_held{0};
std::atomic<HeldFlush> g_held_flush{nullptr};
thread_local std::uint64_t t_work_count = 0;

void flush_held(const c10::Stream* stream) {
  if (g_held.load(std::memory_order_acquire) == 0 || rt::on_worker_thread()) return;
  if (HeldFlush flush = g_held_flush.load(std::memory_order_acquire)) flush(stream);
}

bool holding() {
  return g_mode.load(std::memory_order_relaxed) == EagerMode::kFused &&
         !at::globalContext().deterministicAlgorithms();
}

// The error with the op's name in front, of the original type where c10 has one (the Python
// binding maps each to its exception class: IndexError, ValueError, torch.OutOfMemoryError, ...).
template <typename E>
std::exception_ptr renamed(const E& e, const char* name) {
  return std::make_exception_ptr(E(c10::SourceLocation{__func__, __FILE__, __LINE__},
                                   std::string(name) + ": " + e.what_without_backtrace()));
}

}  // namespace

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

namespace {

// What the runtime's workers need from PyTorch: the stream as their current one, the caller's
// thread count and profiler correlation around each item, and c10's error types. A thread that
// waits for a stream and runs its items itself has the stream current only while they run.
const bool g_hooks_installed = [] {
  rt::ExecutionHooks hooks;
  hooks.worker_started = [](rt::StreamRef s) {
    profiler::record_no_python_frames_on_this_thread();
    const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
    const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s.device));
    impl->setDevice(device);
    impl->exchangeStream(c10::Stream(c10::Stream::UNSAFE, device, s.id));
  };
  hooks.capture = [] {
    return rt::LaunchContext{at::get_num_threads(), profiler::current_correlation()};
  };
  hooks.enter = [](const rt::LaunchContext& context) {
    if (at::get_num_threads() != context.host_threads) at::set_num_threads(context.host_threads);
    profiler::push_correlation(context.correlation);
  };
  hooks.leave = [] { profiler::pop_correlation(); };
  hooks.run_on_stream = [](rt::StreamRef s, void (*run)(void*), void* context) {
    const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(s.device));
    const c10::StreamGuard guard(c10::Stream(c10::Stream::UNSAFE, device, s.id));
    run(context);
  };
  hooks.name_error = &current_error_named;
  rt::set_execution_hooks(hooks);
  return true;
}();

}  // namespace

const char* mode_name(EagerMode mode) {
  switch (mode) {
    case EagerMode::kSync: return "sync";
    case EagerMode::kAsync: return "async";
    case EagerMode::kFused: return "fused";
  }
  return "?";
}

void configure(EagerMode mode, bool blocking) {
  // A runtime without queues runs everything in place.
  if (mode != EagerMode::kSync && !rt::capabilities().queued_execution) mode = EagerMode::kSync;
  if (mode != EagerMode::kFused) settle();  // nothing stays held once fusion is off
  g_mode.store(mode);
  g_blocking.store(blocking);
}

EagerMode configured_mode() { return g_mode.load(std::memory_order_relaxed); }

EagerMode effective_mode() {
  if (g_blocking.load(std::memory_order_relaxed)) return EagerMode::kSync;
  const EagerMode mode = g_mode.load(std::memory_order_relaxed);
  return mode == EagerMode::kFused && !holding() ? EagerMode::kAsync : mode;
}

bool launch_blocking() { return g_blocking.load(std::memory_order_relaxed); }
bool on_worker_thread() { return rt::on_worker_thread(); }

// A thread that captures a device graph (aten/GraphCapture.h) queues all its work, whatever the
// mode, so that all of it is recorded; a kernel running in place (an InlineScope) still runs its
// nested calls in place, and a worker never captures.
bool capture_queues() {
  return capturing() && t_inline_depth == 0 && !rt::on_worker_thread();
}

bool queuing() {
  return (g_mode.load(std::memory_order_relaxed) != EagerMode::kSync &&
          !g_blocking.load(std::memory_order_relaxed) && !rt::on_worker_thread() &&
          t_inline_depth == 0) ||
         capture_queues();
}

Launch decide(Work work, std::size_t largest_bytes) {
  if (capture_queues()) return Launch::kQueue;
  if (!queuing() || (work != Work::kCompiledKernel && largest_bytes <= kInlineBytes && idle() &&
                     rt::collected_nothing())) {
    ++t_work_count;
    return Launch::kInline;
  }
  return work == Work::kOp && holding() ? Launch::kHold : Launch::kQueue;
}

bool queues_every_op() {
  return capture_queues() || (queuing() && !(idle() && rt::collected_nothing()));
}

// An op's kernel runs in place inside one: it is seam work, so under NEURON_MEMORY_PROTECT=1
// device memory is host-accessible for its length (rt::HostAccessWindow).
InlineScope::InlineScope() {
  ++t_inline_depth;
  rt::open_host_access();
}
InlineScope::~InlineScope() {
  rt::close_host_access();
  --t_inline_depth;
}

ItemScope::ItemScope() { rt::open_item(); }
ItemScope::~ItemScope() { rt::close_item(); }
bool collecting() { return rt::collecting(); }

bool idle() {
  // Held first: a hand-over queues its work before it stops counting it as held.
  return g_held.load(std::memory_order_seq_cst) == 0 && rt::idle();
}

std::int64_t queued_items() { return rt::queued_items(); }

void set_held_flush(HeldFlush flush) { g_held_flush.store(flush); }
void add_held(std::int64_t delta) { g_held.fetch_add(delta, std::memory_order_seq_cst); }
std::uint64_t work_count() { return t_work_count; }

rt::StreamRef stream_ref(const c10::Stream& stream) {
  return rt::StreamRef{stream.device_index(), stream.id()};
}

c10::Stream current_stream(c10::DeviceIndex device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
  return impl->getStream(c10::Device(c10::DeviceType::PrivateUse1, device));
}

const rt::StreamClock* stream_clock(const c10::Stream& stream) {
  return rt::stream_clock(stream_ref(stream));
}

// While this thread captures a graph, its work is recorded, not run: each replay runs a copy of
// the work as it was queued (a queued op's work keeps its arguments by value, so every copy
// starts from the same state).
void record_copies(const char* name, std::function<void()> work) {
  record(name, [work = std::move(work)] { return work; });
}

void enqueue(const c10::Stream& stream, const char* name, std::function<void()> work) {
  if (capture_queues()) return record_copies(name, std::move(work));
  rt::wait_for_room();
  flush_held(&stream);
  enqueue_held(stream, name, std::move(work));
}

void enqueue_held(const c10::Stream& stream, const char* name, std::function<void()> work) {
  if (capture_queues()) return record_copies(name, std::move(work));
  ++t_work_count;
  rt::submit(stream_ref(stream), name, std::move(work));
}

// A synchronization waits for work that, while this thread captures, has not run (CUDA: "operation
// not permitted when stream is capturing").
void refuse_synchronization_in_capture(const char* what) {
  if (capture_queues()) {
    refuse_in_capture(what, "it waits for the device (a host synchronization), and captured work "
                            "runs only at replay");
  }
}

void synchronize_stream(const c10::Stream& stream) {
  refuse_synchronization_in_capture("Stream.synchronize()");
  if (accounting::enabled()) {
    accounting::sync(accounting::SyncCause::kSynchronize, "Stream.synchronize", 0);
  }
  flush_held(&stream);
  rt::synchronize_stream(stream_ref(stream));
}

void synchronize_device(c10::DeviceIndex device) {
  refuse_synchronization_in_capture("torch.neuron.synchronize()");
  if (accounting::enabled()) {
    accounting::sync(accounting::SyncCause::kSynchronize, "synchronize", 0);
  }
  flush_held(nullptr);
  rt::synchronize_device(device);
}

void settle() {
  refuse_synchronization_in_capture("an access to device memory from the host (item(), a copy to "
                                    "pageable host memory, printing, an op that runs at the call)");
  ++t_work_count;
  flush_held(nullptr);    // nothing when nothing is held, and on a worker
  rt::synchronize_all();  // free when nothing is queued, and a no-op on a worker
}

bool query_stream(const c10::Stream& stream) {
  flush_held(&stream);
  return rt::query_stream(stream_ref(stream));
}

void raise_pending_error(c10::DeviceIndex device) { rt::raise_pending_error(device); }

void drain_all() { rt::drain(); }

Marker record_marker(const c10::Stream& stream) {
  flush_held(&stream);
  return rt::record_marker(stream_ref(stream), queuing());
}

void wait_marker(const Marker& marker, const c10::Stream& stream) {
  flush_held(&stream);
  rt::wait_marker(marker, stream_ref(stream));
}

}  // namespace torchneuron::launch
