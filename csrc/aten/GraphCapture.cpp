#include "aten/GraphCapture.h"

#include "aten/Launch.h"
#include "profiler/KernelActivity.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace torchneuron::launch {
namespace {

// Captures open on any thread: the hot path asks capturing() only when this is not zero.
std::atomic<int> g_open{0};
std::mutex g_streams_mutex;
std::vector<c10::Stream>& capturing_streams() {
  static auto* streams = new std::vector<c10::Stream>();
  return *streams;
}
thread_local std::shared_ptr<CapturedGraph> t_capture;

void close_capture() {
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    auto& streams = capturing_streams();
    auto it = std::find(streams.begin(), streams.end(), t_capture->stream);
    if (it != streams.end()) streams.erase(it);
  }
  t_capture.reset();
  g_open.fetch_sub(1, std::memory_order_release);
}

}  // namespace

void begin_capture(const c10::Stream& stream) {
  TORCH_CHECK(!t_capture, "neuron graph capture: this thread already captures a graph (on stream ",
              t_capture ? t_capture->stream.id() : 0, "); end it (capture_end) before another");
  t_capture = std::make_shared<CapturedGraph>(CapturedGraph{stream, {}});
  {
    std::lock_guard<std::mutex> lock(g_streams_mutex);
    capturing_streams().push_back(stream);
  }
  g_open.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<CapturedGraph> end_capture() {
  TORCH_CHECK(t_capture, "neuron graph capture: capture_end without capture_begin on this thread");
  std::shared_ptr<CapturedGraph> graph = t_capture;
  close_capture();
  return graph;
}

void abandon_capture() {
  if (t_capture) close_capture();
}

bool capturing() {
  return g_open.load(std::memory_order_acquire) != 0 && t_capture != nullptr;
}

std::size_t captured_work() { return t_capture ? t_capture->work.size() : 0; }

bool stream_capturing(const c10::Stream& stream) {
  if (g_open.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  const auto& streams = capturing_streams();
  return std::find(streams.begin(), streams.end(), stream) != streams.end();
}

void record_rerunnable(const char* name, std::function<void()> run) {
  TORCH_INTERNAL_ASSERT(t_capture, "record_rerunnable() outside a capture");
  t_capture->work.push_back(CapturedWork{name, std::move(run), nullptr});
}

void record(const char* name, MakeWork make) {
  TORCH_INTERNAL_ASSERT(t_capture, "record() outside a capture");
  t_capture->work.push_back(CapturedWork{name, nullptr, std::move(make)});
  t_capture->makes = true;
}

void refuse_in_capture(const std::string& what, const std::string& why) {
  TORCH_CHECK(false, what, " cannot be captured in a neuron graph: ", why,
              ". Run it before capture_begin or after capture_end (the capture is still open: "
              "end it with capture_end, or leave the torch.neuron.graph block)");
}

void replay(const std::shared_ptr<const CapturedGraph>& graph, const c10::Stream& stream) {
  if (capturing()) {
    refuse_in_capture("a graph's replay", "capturing a replay inside another capture is not supported");
  }
  // Work made for this replay (random ops' draws), in capture order, on this thread.
  std::vector<std::function<void()>> made;
  if (graph->makes) {
    made.resize(graph->work.size());
    for (std::size_t i = 0; i < made.size(); ++i) {
      if (graph->work[i].make) made[i] = graph->work[i].make();
    }
  }
  const c10::DeviceIndex device = stream.device_index();
  // One item, one device activity spanning the pieces' own kernels.
  auto run = [graph, made = std::move(made), device]() mutable {
    const profiler::KernelActivityScope activity("NeuronGraph.replay", device);
    std::exception_ptr first;
    for (std::size_t i = 0; i < graph->work.size(); ++i) {
      const CapturedWork& piece = graph->work[i];
      try {
        if (piece.run) {
          piece.run();
        } else {
          made[i]();
        }
      } catch (...) {
        if (!first) first = current_error_named(piece.name);
      }
    }
    if (first) std::rethrow_exception(first);
  };
  // The launch decision of a compiled kernel (compile/KernelLaunch.cpp): queued whenever
  // execution is queued. In synchronous execution (NEURON_EAGER_MODE=sync, launch blocking) the
  // replay runs on the calling thread, as ops do there, after the work queued before it; no
  // hand-over to the stream's worker and back (a wake-up each way, per replay).
  if (decide(Work::kCompiledKernel, 0) != Launch::kInline) {
    return enqueue(stream, "NeuronGraph.replay", std::move(run));
  }
  settle();
  const InlineScope in_place;
  run();
}

}  // namespace torchneuron::launch
