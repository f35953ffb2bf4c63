// The Work of an asynchronous collective on neuron tensors. gloo ran it on CPU aliases of the
// neuron tensors, so gloo's Work reports those aliases as its results (Work.result(),
// Work.get_future().value()). NeuronWork forwards everything to gloo's Work and hands back, in
// place of each alias, the neuron tensor the caller passed, as NCCL's Work reports CUDA tensors.
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/library.h>

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
    if (v.isTensor()) return map(v.toTensor());
    if (v.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : v.toTensorList()) out.push_back(map(t));
      return out;
    }
    if (v.isList()) {
      c10::impl::GenericList out(v.toList().elementType());
      for (const c10::IValue& e : v.toListRef()) out.push_back(map(e));
      return out;
    }
    return v;
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

c10::intrusive_ptr<c10d::Work> neuron_work(const c10::intrusive_ptr<c10d::Work>& gloo,
                                           const std::vector<at::Tensor>& aliases,
                                           const std::vector<at::Tensor>& tensors) {
  return c10::make_intrusive<NeuronWork>(gloo, AliasesToNeuron(aliases, tensors));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchneuron, m) {
  m.def("neuron_work(__torch__.torch.classes.c10d.Work work, Tensor[] aliases, Tensor[] tensors)"
        " -> __torch__.torch.classes.c10d.Work",
        &neuron_work);
}
