// The launch decision: for every op on neuron, whether it runs now on the calling thread, is
// queued on a stream of the runtime (runtime/Execution.h), or is held back to be fused with the
// ops around it (fused_eager/FusedEager.h). decide() is the one place that says so; the boxed
// fallback, the native kernels' fast paths, copies and compiled kernels all ask it.
//
// The eager mode is one value, set once at configuration (NEURON_EAGER_MODE); what may change
// while the program runs is read here, where it applies: NEURON_LAUNCH_BLOCKING (set with the
// mode) makes every op synchronous, torch.use_deterministic_algorithms keeps fused mode from
// holding ops (it queues them as async mode does).
//
// Rules every queued op follows (docs/how-it-works.md):
// - Its output metadata is decided, and its memory allocated, at the call; only its data is
//   written later, by the stream's worker, in the order the calls were made on that stream.
// - Nothing on a calling thread reads or writes neuron memory while work is queued: every host
//   access first settles the device (aten/HostAccess.h), which makes it a synchronization point.
// - An error raised by queued work is kept and re-raised, with its type and the op's name, at the
//   next synchronization point; later work still runs.
// - A worker runs with the intra-op thread count its caller had when it queued the work.
#pragma once

#include "runtime/Execution.h"

#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>

namespace torchneuron::launch {

enum class EagerMode : std::uint8_t { kSync, kAsync, kFused };
// "sync", "async", "fused".
const char* mode_name(EagerMode mode);

// Once, from the configuration (torchneuron/runtime/config.py).
void configure(EagerMode mode, bool launch_blocking);
// NEURON_EAGER_MODE as configured.
EagerMode configured_mode();
// The mode ops run in now: sync under NEURON_LAUNCH_BLOCKING=1, async for fused mode while
// deterministic algorithms are on.
EagerMode effective_mode();
bool launch_blocking();

// What the decision is asked about.
enum class Work : std::uint8_t {
  kOp,              // an ATen op (the fallback, a fast path): may run inline, be queued or held
  kCopy,            // a copy between devices or within neuron: inline or queued, never held
  kCompiledKernel,  // a compiled graph's kernel: queued whenever execution is queued
};
enum class Launch : std::uint8_t { kInline, kQueue, kHold };

// The launch decision. `largest_bytes`: the op's largest neuron operand. Runs inline when
// execution is synchronous (the mode, launch blocking, a device worker, or an InlineScope); when
// queued, a small op (kInlineBytes or less) on an idle device runs inline too, paying no
// hand-off to a worker (`x + y; x.sum().item()` stays cheap). kHold is a request: the fused
// component holds only the ops it can fuse and queues the rest.
Launch decide(Work work, std::size_t largest_bytes);
constexpr std::size_t kInlineBytes = 64 * 1024;
// True when work issued on this thread is queued rather than run in place (decide's first test).
bool queuing();
// True when decide(Work::kOp, n) would not run an op inline whatever n: execution is queued and
// work is pending (queued, running, held or collected). The fallback then reads an op's
// arguments for the queue in the walk that checks them (aten/CallArguments.h).
bool queues_every_op();
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

// While open on a thread, the work that thread queues on one stream reaches the runtime as one
// item (runtime/Execution.h's open_item): a compiled graph's call.
class ItemScope {
 public:
  ItemScope();
  ~ItemScope();
  ItemScope(const ItemScope&) = delete;
  ItemScope& operator=(const ItemScope&) = delete;
};
bool collecting();

// No work queued, running or held on any stream (two atomic loads).
bool idle();
// Items queued or running over all streams, not counting held ops (tests read it).
std::int64_t queued_items();

// Fused mode holds queued ops back (fused_eager/FusedEager.h). Before anything that must come
// after held work (work queued on the stream, a marker, a synchronization or query; `stream` null:
// every stream) the holder's flush hands it over.
using HeldFlush = void (*)(const c10::Stream* stream);
void set_held_flush(HeldFlush flush);
// Held ops count as pending work: the device is not idle (no op runs inline past them) and
// settle() flushes them and waits for them. `delta` ops were held (+) or handed over (-).
void add_held(std::int64_t delta);
// Queues work that was held back, in its place (without flushing held work again).
void enqueue_held(const c10::Stream& stream, const char* name, std::function<void()> work);
// Work this thread has queued, run inline or settled for so far: a compiled chain's kernel
// calls are recorded only when calling it did nothing else (compile/KernelLaunch.cpp).
std::uint64_t work_count();

// Queues `work` on `stream` after the held work (runtime/Execution.h's enqueue).
void enqueue(const c10::Stream& stream, const char* name, std::function<void()> work);
// The calling thread's current stream of `device`.
c10::Stream current_stream(c10::DeviceIndex device);
rt::StreamRef stream_ref(const c10::Stream& stream);
const rt::StreamClock* stream_clock(const c10::Stream& stream);

// Waits until the stream (every stream of the device) ran its work, held work included, then
// raises the device's pending error, if any. Not on a worker.
void synchronize_stream(const c10::Stream& stream);
void synchronize_device(c10::DeviceIndex device);
// Before the calling thread touches neuron memory: waits for all queued and held work of every
// device and raises a pending error. A no-op (two atomic loads) when nothing is queued and no
// error is pending, and on a worker.
void settle();
bool query_stream(const c10::Stream& stream);
void raise_pending_error(c10::DeviceIndex device);
// Waits for every stream without raising (the allocator's emptyCache). A no-op on a worker.
void drain_all();

// Inside a catch block: the error being handled with `name` in front, of its own c10 type where
// it has one (what the runtime keeps of queued work that raised).
std::exception_ptr current_error_named(const char* name);

using Marker = rt::Marker;
Marker record_marker(const c10::Stream& stream);
void wait_marker(const Marker& marker, const c10::Stream& stream);

}  // namespace torchneuron::launch
