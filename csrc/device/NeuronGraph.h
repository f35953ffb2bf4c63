// Device graphs: PyTorch's device-generic graph interface (at::GraphImplInterface, behind
// torch.accelerator.Graph and torch.neuron.NeuronGraph) for neuron. A capture records the work the
// capturing thread queues (aten/GraphCapture.h); a replay queues it again on the current stream
// as one item, at the cost of its kernels.
//
// Memory follows CUDA's rules where they matter to a program: inputs and outputs are the tensors
// the capture read and made (static: a replay reads and writes the same memory), and the memory
// captured work uses stays the graph's, reused by every replay, until reset() or the graph's end.
// Unlike CUDA, a pool shared by several graphs (`pool`) is only an id: each graph keeps its own
// memory.
#pragma once

// internal: see runtime/torch_internals.py "at::GraphImplRegistry / at::GraphImplInterface"
#include <ATen/core/GraphImplInterface.h>
#include <c10/core/Stream.h>

#include <memory>
#include <string>

namespace torchneuron {

namespace launch {
struct CapturedGraph;  // aten/GraphCapture.h
}

class NeuronGraph final : public at::GraphImplInterface {
 public:
  explicit NeuronGraph(const at::GraphImplArgs& args = {});
  ~NeuronGraph() override;

  void capture_begin(at::MempoolId_t pool = {0, 0},
                     at::GraphCaptureMode mode = at::GraphCaptureMode::Default) override;
  void capture_end() override;
  void instantiate() override;
  void replay() override;
  void reset() override;
  at::MempoolId_t pool() const override;
  void enable_debug_mode() override;
  void debug_dump(const std::string& path) override;

  // The number of pieces of work a replay runs (tests, debug_dump).
  std::size_t size() const;

 private:
  std::shared_ptr<launch::CapturedGraph> graph_;
  at::MempoolId_t pool_{0, 0};
  bool capturing_ = false;
  bool debug_ = false;
};

// A new pool id, as torch.cuda.graph_pool_handle() gives one.
at::MempoolId_t graph_pool_handle();
// Whether some thread captures on the calling thread's current stream of the current device.
bool is_current_stream_capturing();
// Registers NeuronGraph for torch.accelerator.Graph under the device's name (known once
// torch.utils.rename_privateuse1_backend ran); once.
void register_graph_impl();

}  // namespace torchneuron
