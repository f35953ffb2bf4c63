#include "device/NeuronGraph.h"

#include "aten/GraphCapture.h"
#include "aten/Launch.h"
#include "device/CurrentDevice.h"

#include <ATen/record_function.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <fstream>

namespace torchneuron {
namespace {

// Pool ids: graph-private ones are {0, n}, those graph_pool_handle() hands out {n, 0}, as CUDA
// numbers them (c10::cuda::MempoolId_t).
std::atomic<c10::CaptureId_t> g_next_pool{1};

}  // namespace

NeuronGraph::NeuronGraph(const at::GraphImplArgs& /*args: keep_graph changes nothing here*/) {}
NeuronGraph::~NeuronGraph() {
  if (capturing_) launch::abandon_capture();
}

void NeuronGraph::capture_begin(at::MempoolId_t pool, at::GraphCaptureMode /*mode*/) {
  TORCH_CHECK(!graph_, "this NeuronGraph already holds a captured graph; call reset() before "
                       "capturing another into it");
  TORCH_CHECK(!capturing_, "this NeuronGraph is already capturing");
  const c10::DeviceIndex device = current_device();
  const c10::Stream stream = launch::current_stream(device);
  TORCH_CHECK(stream.id() != 0,
              "neuron graphs must be captured on a stream other than the default stream (as CUDA "
              "graphs): use torch.neuron.graph(...), which captures on a side stream, or capture "
              "inside `with torch.neuron.stream(torch.neuron.Stream()):`");
  // Work queued before the capture is not part of it; it runs before any replay does.
  launch::synchronize_stream(stream);
  pool_ = (pool.first != 0 || pool.second != 0) ? pool
                                                 : at::MempoolId_t{0, g_next_pool.fetch_add(1)};
  launch::begin_capture(stream);
  capturing_ = true;
}

void NeuronGraph::capture_end() {
  TORCH_CHECK(capturing_, "NeuronGraph.capture_end() without capture_begin()");
  const c10::Stream stream = launch::current_stream(current_device());
  std::shared_ptr<launch::CapturedGraph> graph = launch::end_capture();
  capturing_ = false;
  TORCH_CHECK(graph->stream == stream, "NeuronGraph.capture_end() on stream ", stream.id(),
              " of device ", static_cast<int>(stream.device_index()),
              ": the capture began on stream ", graph->stream.id(), " of device ",
              static_cast<int>(graph->stream.device_index()), "; end it on the same stream");
  if (graph->work.empty()) {
    TORCH_WARN("The neuron graph is empty: the capture recorded no device work, so replay() "
               "does nothing. Did the captured code run on neuron tensors?");
  }
  graph_ = std::move(graph);
}

void NeuronGraph::instantiate() {
  TORCH_CHECK(graph_, "NeuronGraph.instantiate() without a preceding successful capture");
}

void NeuronGraph::replay() {
  TORCH_CHECK(graph_, "NeuronGraph.replay() without a preceding successful capture");
  RECORD_FUNCTION("NeuronGraph.replay", std::vector<c10::IValue>());
  launch::replay(graph_, launch::current_stream(graph_->stream.device_index()));
}

void NeuronGraph::reset() {
  TORCH_CHECK(!capturing_, "NeuronGraph.reset() while capturing; end the capture first");
  graph_.reset();  // the memory the captured work referenced returns to the allocator
}

at::MempoolId_t NeuronGraph::pool() const {
  TORCH_CHECK(pool_.first != 0 || pool_.second != 0,
              "NeuronGraph.pool() before capture_begin(): the graph has no pool yet");
  return pool_;
}

void NeuronGraph::enable_debug_mode() { debug_ = true; }

void NeuronGraph::debug_dump(const std::string& path) {
  TORCH_CHECK(debug_, "NeuronGraph.debug_dump() needs enable_debug_mode() before the capture");
  TORCH_CHECK(graph_, "NeuronGraph.debug_dump() without a captured graph");
  std::ofstream out(path);
  TORCH_CHECK(out, "NeuronGraph.debug_dump(): cannot write ", path);
  out << "# neuron graph: " << graph_->work.size() << " pieces of work, captured on stream "
      << graph_->stream.id() << " of neuron:" << static_cast<int>(graph_->stream.device_index())
      << "\n";
  for (const auto& piece : graph_->work) out << piece.name << "\n";
}

std::size_t NeuronGraph::size() const { return graph_ ? graph_->work.size() : 0; }

at::MempoolId_t graph_pool_handle() { return {g_next_pool.fetch_add(1), 0}; }

bool is_current_stream_capturing() {
  return launch::stream_capturing(launch::current_stream(current_device()));
}

// internal: see runtime/torch_internals.py "at::GraphImplRegistry / at::GraphImplInterface"
void register_graph_impl() {
  static const bool registered = [] {
    const std::string key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
    at::GraphImplRegistry()->Register(
        key, [](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
          return std::make_unique<NeuronGraph>(args);
        });
    return true;
  }();
  (void)registered;
}

}  // namespace torchneuron
