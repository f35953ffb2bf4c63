"""Bug class found by the model battery (Parakeet/Nemotron RNN-T decoders): nn.LSTM and nn.GRU
on neuron take ATen's fused-cell path (as on CUDA), whose kernels exist only for CUDA, so every
LSTM/GRU raised "not implemented". csrc/aten/native/RnnCells.cpp provides the cells; results,
gradients and no-grad inference must match the CPU."""

import pytest
import torch


def _clone_to_neuron(module):
    dev = type(module)(**module._ctor)
    dev.load_state_dict(module.state_dict())
    return dev.to("neuron")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bias,batch_first,layers,bidirectional",
                         [(True, False, 1, False), (False, True, 2, True)])
def test_rnn_forward_and_backward_match_cpu(kind, bias, batch_first, layers, bidirectional):
    ctor = dict(input_size=5, hidden_size=7, num_layers=layers, bias=bias,
                batch_first=batch_first, bidirectional=bidirectional)
    cpu = getattr(torch.nn, kind)(**ctor)
    cpu._ctor = ctor
    dev = _clone_to_neuron(cpu)
    x = torch.randn(3, 4, 5)
    out_c, _ = cpu(x)
    out_d, _ = dev(x.to("neuron"))
    torch.testing.assert_close(out_d.cpu(), out_c)
    out_c.pow(2).sum().backward()
    out_d.pow(2).sum().backward()
    for (name, pc), (_, pd) in zip(cpu.named_parameters(), dev.named_parameters()):
        torch.testing.assert_close(pd.grad.cpu(), pc.grad, msg=lambda m: f"{name}: {m}")


def test_lstm_inference_mode_matches_cpu():
    cpu = torch.nn.LSTM(3, 4)
    cpu._ctor = dict(input_size=3, hidden_size=4)
    dev = _clone_to_neuron(cpu)
    x = torch.randn(6, 2, 3)
    with torch.inference_mode():
        (out_d, (h_d, c_d)), (out_c, (h_c, c_c)) = dev(x.to("neuron")), cpu(x)
    for a, b in ((out_d, out_c), (h_d, h_c), (c_d, c_c)):
        torch.testing.assert_close(a.cpu(), b)


def test_lstm_cell_with_wrong_hidden_size_raises():
    dev = torch.nn.LSTM(3, 4).to("neuron")
    h = torch.zeros(1, 2, 5, device="neuron")
    with pytest.raises(RuntimeError, match="hidden"):
        dev(torch.randn(6, 2, 3, device="neuron"), (h, h))
