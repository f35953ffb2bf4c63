// torch.profiler's extension point for a PrivateUse1 device (PyTorch 2.13): a Kineto
// IActivityProfiler registered with REGISTER_PRIVATEUSE1_PROFILER. With
// ProfilerActivity.PrivateUse1, torch.profiler runs in KINETO_PRIVATEUSE1 mode and Kineto opens
// one session of ours per trace; the session turns KernelActivity's records into Kineto
// activities of type CONCURRENT_KERNEL (what CUDA kernels are; torch reads them as PrivateUse1
// device time because the backend is renamed), linked to the CPU op that launched them.
// Kineto's header formats with fmt, whose compiled functions libtorch does not export: use it
// header-only here, or the extension fails to load (undefined fmt::v12::vformat).
#define FMT_HEADER_ONLY
// Kineto's GenericTraceActivity::addMetadata formats with fmt, which libtorch links privately:
// fmt header-only compiles what it needs into this file.
#define FMT_HEADER_ONLY 1

#include "profiler/KernelActivity.h"

#include "runtime/NeuronRuntime.h"

#include <kineto/libkineto.h>
#include <torch/csrc/Export.h>

#include <chrono>
#include <functional>
#include <memory>
#include <sstream>

namespace torchneuron::profiler {
namespace {

using libkineto::ActivityType;

const std::set<ActivityType>& kActivities() {
  static const std::set<ActivityType> types{ActivityType::CONCURRENT_KERNEL,
                                            ActivityType::GPU_MEMCPY,
                                            ActivityType::GPU_USER_ANNOTATION};
  return types;
}

std::string shapes_json(const std::vector<Operand>& operands) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (i) out << ", ";
    out << "[";
    for (std::size_t j = 0; j < operands[i].shape.size(); ++j) {
      if (j) out << ", ";
      out << operands[i].shape[j];
    }
    out << "]";
  }
  out << "]";
  return out.str();
}

// "Float,BFloat16": Kineto's trace writer turns the backslash of an escaped quote into "/", so
// the dtypes travel without quotes.
std::string dtypes_list(const std::vector<Operand>& operands) {
  std::string out;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    if (i) out += ",";
    out += operands[i].dtype;
  }
  return out;
}

class NeuronProfilerSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit NeuronProfilerSession(std::set<ActivityType> types) : types_(std::move(types)) {}

  void start() override {
    // The device clock is monotonic; the trace's clock is Unix time in ns. One offset, taken
    // when the trace starts, places device activities on the trace's timeline.
    const int64_t unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    offset_ns_ = unix_ns - rt::clock_ns();
    start_recording();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    stop_recording();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0,
                 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked, int64_t /*startTime*/,
                    int64_t /*endTime*/) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, "neuron");
    buffer_->gpuOpCount = 0;
    for (const KernelRecord& r : take_records()) {
      const ActivityType type = r.annotation ? ActivityType::GPU_USER_ANNOTATION
                                : r.memcpy   ? ActivityType::GPU_MEMCPY
                                             : ActivityType::CONCURRENT_KERNEL;
      if (!types_.count(type)) continue;
      auto activity = std::make_unique<libkineto::GenericTraceActivity>(buffer_->span, type, r.name);
      activity->startTime = r.start_ns + offset_ns_;
      activity->endTime = r.end_ns + offset_ns_;
      activity->id = static_cast<int32_t>(r.correlation);
      activity->device = r.device;
      activity->resource = static_cast<int32_t>(r.stream);
      activity->threadId = static_cast<int32_t>(r.stream);
      activity->linked = r.correlation ? linked(static_cast<int32_t>(r.correlation)) : nullptr;
      activity->addMetadata("device", r.device);
      activity->addMetadata("stream", r.stream);
      activity->addMetadata("correlation", r.correlation);
      activity->addMetadata("device_start_ns", r.start_ns);
      activity->addMetadata("device_end_ns", r.end_ns);
      if (!r.annotation) {
        activity->addMetadataQuoted("input_shapes", shapes_json(r.inputs));
        activity->addMetadataQuoted("input_dtypes", dtypes_list(r.inputs));
        activity->addMetadataQuoted("output_shapes", shapes_json(r.outputs));
        ++buffer_->gpuOpCount;
      }
      activity->log(logger);
      buffer_->activities.push_back(std::move(activity));
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{0, 0, "neuron", "neuron (software NeuronCore)"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  std::set<ActivityType> types_;
  int64_t offset_ns_ = 0;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return kActivities(); }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config& /*config*/) override {
    std::set<ActivityType> ours;
    for (ActivityType t : activity_types) {
      if (kActivities().count(t)) ours.insert(t);
    }
    if (ours.empty()) return nullptr;
    return std::make_unique<NeuronProfilerSession>(std::move(ours));
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_{"neuron"};
};

}  // namespace
}  // namespace torchneuron::profiler

// torch/csrc/profiler/standalone/privateuse1_profiler.h declares the registry only under
// USE_KINETO and includes Kineto's headers by their bare names, which an extension's include
// path does not reach; its two members called here are declared as that header declares them
// (runtime/torch_internals.py checks the header still says so).
namespace torch::profiler::impl {
using PrivateUse1ProfilerFactory =
    std::function<std::unique_ptr<libkineto::IActivityProfiler>()>;
class TORCH_API PrivateUse1ProfilerRegistry {
 public:
  static PrivateUse1ProfilerRegistry& instance();
  void registerFactory(PrivateUse1ProfilerFactory factory);
};
}  // namespace torch::profiler::impl

namespace torchneuron::profiler {
namespace {
// At load of _C (REGISTER_PRIVATEUSE1_PROFILER's static registration): PyTorch hands the factory
// to Kineto when Kineto initializes, or at once if it already has.
const bool g_registered = [] {
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(
      [] { return std::make_unique<NeuronActivityProfiler>(); });
  return true;
}();
}  // namespace
}  // namespace torchneuron::profiler
