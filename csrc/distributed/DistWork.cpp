// The Works of asynchronous collectives on neuron tensors.
//
// NeuronWork: gloo ran the collective on CPU aliases of the neuron tensors, so gloo's Work reports
// those aliases as its results (Work.result(), Work.get_future().value()). NeuronWork forwards
// everything to gloo's Work and hands back, in place of each alias, the neuron tensor the caller
// passed, as NCCL's Work reports CUDA tensors.
//
// DeferredWork: the Work of a collective that torchneuron starts later, on the group's sequencing
// thread, once the ranks agreed on it (torchneuron/distributed/sequencer.py); it completes with
// the Work of the started collective, or fails with the reason it could not start. (c10d's own
// wrapper of a future, _create_work_from_future, returns normally from wait() when the future
// failed; this one raises, as gloo's Work does.)
#include "aten/IValueTensors.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/library.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

class AliasesToNeuron {
 public:
  AliasesToNeuron(const std::vector<at::Tensor>& aliases, const std::vector<at::Tensor>& tensors) {
    TORCH_CHECK(aliases.size() == tensors.size(), "neuron_work: ", aliases.size(),
                " aliases but ", tensors.size(), " neuron tensors");
    for (std::size_t i = 0; i < aliases.size(); ++i) {
      pairs_.emplace_back(aliases[i].unsafeGetTensorImpl(), tensors[i]);
    }
  }

  at::Tensor map(const at::Tensor& t) const {
    for (const auto& [alias, neuron] : pairs_) {
      if (t.unsafeGetTensorImpl() == alias) return neuron;
    }
    return t;
  }

  // Results are tensors, lists of them, or lists of such lists (all_gather's outputs).
  c10::IValue map(const c10::IValue& v) const {
    return torchneuron::map_tensors(v, [this](const at::Tensor& t) { return map(t); });
  }

 private:
  // The aliases themselves stay alive in gloo's Work, so their addresses identify them.
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> pairs_;
};

class NeuronWork : public c10d::Work {
 public:
  NeuronWork(c10::intrusive_ptr<c10d::Work> gloo, AliasesToNeuron mapping)
      : c10d::Work(-1, gloo->retrieveOpType()), gloo_(std::move(gloo)),
        mapping_(std::make_shared<AliasesToNeuron>(std::move(mapping))) {}

  bool isCompleted() override { return gloo_->isCompleted(); }
  bool isSuccess() const override { return gloo_->isSuccess(); }
  std::exception_ptr exception() const override { return gloo_->exception(); }
  int sourceRank() const override { return gloo_->sourceRank(); }
  void synchronize() override { gloo_->synchronize(); }
  bool wait(std::chrono::milliseconds timeout) override { return gloo_->wait(timeout); }
  void abort() override { gloo_->abort(); }
  float getDuration() const override { return gloo_->getDuration(); }
  uint64_t getSequencenumber() const override { return gloo_->getSequencenumber(); }

  std::vector<at::Tensor> result() override {
    std::vector<at::Tensor> out = gloo_->result();
    for (at::Tensor& t : out) t = mapping_->map(t);
    return out;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    c10::intrusive_ptr<c10::ivalue::Future> fut = gloo_->getFuture();
    auto mapping = mapping_;
    return fut->then(
        [mapping](c10::ivalue::Future& done) { return mapping->map(done.value()); },
        fut->elementType());
  }

 private:
  c10::intrusive_ptr<c10d::Work> gloo_;
  std::shared_ptr<const AliasesToNeuron> mapping_;
};

class DeferredWork : public c10d::Work {
 public:
  DeferredWork()
      : c10d::Work(-1, c10d::OpType::UNKNOWN),
        fut_(c10::make_intrusive<c10::ivalue::Future>(c10::AnyType::get())) {}

  // Completes (or fails) with the Work of the collective once the sequencing thread started it.
  void follow(const c10::intrusive_ptr<c10d::Work>& started) {
    c10::intrusive_ptr<DeferredWork> self = c10::intrusive_ptr<DeferredWork>::reclaim_copy(this);
    c10::intrusive_ptr<c10::ivalue::Future> inner;
    try {
      inner = started->getFuture();
    } catch (const c10::Error&) {
      // Some of gloo's Works (the coalesced collectives') have no future: wait on the side.
      std::thread([self, started] {
        try {
          started->wait();
          self->complete(c10::IValue());  // they have no result() either
        } catch (...) {
          self->fail(std::current_exception());
        }
      }).detach();
      return;
    }
    inner->addCallback([self](c10::ivalue::Future& done) {
      if (done.hasError()) {
        self->fail(done.exception_ptr());
      } else {
        self->complete(done.value());
      }
    });
  }

  void complete(const c10::IValue& value) {
    fut_->markCompleted(value);
    finish();
  }

  // Fails without having started (the ranks disagreed, a peer is gone), or with the collective.
  void fail(std::exception_ptr error) {
    fut_->setError(error);
    finish(error);
  }

  // Work's own wait(timeout), isCompleted(), isSuccess() and exception() read what finish() set.
  std::vector<at::Tensor> result() override {
    fut_->waitAndThrow();
    return fut_->value().isTensorList() ? fut_->value().toTensorVector()
                                        : std::vector<at::Tensor>{};
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
};

DeferredWork& as_deferred(const c10::intrusive_ptr<c10d::Work>& work) {
  auto* deferred = dynamic_cast<DeferredWork*>(work.get());
  TORCH_CHECK(deferred != nullptr, "expected a Work made by torchneuron.deferred_work");
  return *deferred;
}

c10::intrusive_ptr<c10d::Work> deferred_work() { return c10::make_intrusive<DeferredWork>(); }

void deferred_work_follow(const c10::intrusive_ptr<c10d::Work>& work,
                          const c10::intrusive_ptr<c10d::Work>& started) {
  as_deferred(work).follow(started);
}

void deferred_work_fail(const c10::intrusive_ptr<c10d::Work>& work, const std::string& message) {
  as_deferred(work).fail(std::make_exception_ptr(std::runtime_error(message)));
}

c10::intrusive_ptr<c10d::Work> neuron_work(const c10::intrusive_ptr<c10d::Work>& gloo,
                                           const std::vector<at::Tensor>& aliases,
                                           const std::vector<at::Tensor>& tensors) {
  return c10::make_intrusive<NeuronWork>(gloo, AliasesToNeuron(aliases, tensors));
}

// How many references hold `work`: a synchronous collective waits until gloo's worker thread let
// go of its Work, so that the Work (and the CPU aliases it holds) is freed on the calling thread.
int64_t work_use_count(const c10::intrusive_ptr<c10d::Work>& work) {
  return static_cast<int64_t>(work.use_count());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("work_use_count(__torch__.torch.classes.c10d.Work work) -> int", &work_use_count);
  m.def("neuron_work(__torch__.torch.classes.c10d.Work work, Tensor[] aliases, Tensor[] tensors)"
        " -> __torch__.torch.classes.c10d.Work",
        &neuron_work);
  m.def("deferred_work() -> __torch__.torch.classes.c10d.Work", &deferred_work);
  m.def("deferred_work_follow(__torch__.torch.classes.c10d.Work work, "
        "__torch__.torch.classes.c10d.Work started) -> ()",
        &deferred_work_follow);
  m.def("deferred_work_fail(__torch__.torch.classes.c10d.Work work, str message) -> ()",
        &deferred_work_fail);
}
