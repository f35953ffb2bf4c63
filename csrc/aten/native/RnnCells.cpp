// nn.LSTM and nn.GRU on any non-CPU device run their cells through _thnn_fused_lstm_cell and
// _thnn_fused_gru_cell (ATen's RNN.cpp picks them for CUDA, XPU and PrivateUse1), which have
// only CUDA kernels: without these, every LSTM/GRU on neuron raised "not implemented". They are
// the cell equations in ATen ops, registered for autograd too so that backward comes from the
// ops' own derivatives (the CUDA-only *_backward_impl kernels are never needed).
#include <ATen/ATen.h>
#include <torch/library.h>

namespace torchneuron {
namespace {

at::Tensor with_biases(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

// Gates in PyTorch's order i, f, g, o; workspace holds the activated gates like CUDA's.
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = with_biases(with_biases(input_gates, input_bias) + hidden_gates, hidden_bias);
  auto chunks = gates.chunk(4, 1);
  at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid();
  at::Tensor g = chunks[2].tanh(), o = chunks[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// Gates in PyTorch's order r, z, n; the new gate sees the reset hidden part only.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  auto ig = with_biases(input_gates, input_bias).chunk(3, 1);
  auto hg = with_biases(hidden_gates, hidden_bias).chunk(3, 1);
  at::Tensor r = (ig[0] + hg[0]).sigmoid();
  at::Tensor z = (ig[1] + hg[1]).sigmoid();
  at::Tensor n = (ig[2] + r * hg[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hg[2]}, 1)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", fused_lstm_cell);
  m.impl("_thnn_fused_gru_cell", fused_gru_cell);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", fused_lstm_cell);
  m.impl("_thnn_fused_gru_cell", fused_gru_cell);
}

}  // namespace torchneuron
