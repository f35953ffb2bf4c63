// Device-graph capture at the launch decision (aten/Launch.h): while a thread captures, every op
// it issues is queued, never run inline or held, and what would reach the stream is recorded
// instead; a replay queues the recorded work again, as one item of the replaying stream, without
// Python, autograd or the launch decision (device/NeuronGraph.h owns the graph).
//
// CUDA's rules: nothing captured runs at capture; the memory captured work reads and writes is
// the graph's until it is reset (the recorded work references it); work that must run at the
// call (an op whose results depend on its data, a host synchronization) cannot be captured and
// raises, naming what and why.
#pragma once

#include <c10/core/Stream.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torchneuron::launch {

// A captured piece of work: `run`, which every replay calls as it is (it keeps no state of its
// own between calls), or else `make`, which runs at each replay on the replaying thread, in
// capture order, and gives the work to run once: a random op reserves its draws there, so each
// replay draws new numbers, in replay order, as the same ops run eagerly would.
using MakeWork = std::function<std::function<void()>()>;
struct CapturedWork {
  const char* name;  // outlives the graph (an op's schema name, a literal)
  std::function<void()> run;
  MakeWork make;
};

// The work one capture recorded, in order.
struct CapturedGraph {
  c10::Stream stream;
  std::vector<CapturedWork> work;
  bool makes = false;  // some piece has a `make`
};

// Starts capturing this thread's work; `stream` is the one it is captured on (the thread's
// current stream). Raises when this thread already captures.
void begin_capture(const c10::Stream& stream);
// Ends this thread's capture and returns what it recorded. Raises when it captures nothing.
std::shared_ptr<CapturedGraph> end_capture();
// Ends it after an error, dropping what it recorded (a capture's exception path).
void abandon_capture();
// This thread captures (one thread-local load).
bool capturing();
// The pieces of work this thread's open capture recorded so far, what its replay would run (0
// when it captures nothing): NeuronGraph.recorded_work() keeps it as the capture ends.
std::size_t captured_work();
// Some thread captures on `stream` (torch.neuron.is_current_stream_capturing).
bool stream_capturing(const c10::Stream& stream);

// Records work for the capture of this thread: work every replay runs as it is, or work made
// anew at each replay (enqueue() records a copy of what it is given that way).
void record_rerunnable(const char* name, std::function<void()> run);
void record(const char* name, MakeWork make);
// Raises the error of work that cannot be captured: "`what` cannot be captured in a neuron graph:
// `why`".
[[noreturn]] void refuse_in_capture(const std::string& what, const std::string& why);

// Queues `graph`'s work on `stream` as one item: its pieces run in order; the first error
// raised is kept with its piece's name, and the pieces after it still run.
void replay(const std::shared_ptr<const CapturedGraph>& graph, const c10::Stream& stream);

}  // namespace torchneuron::launch
