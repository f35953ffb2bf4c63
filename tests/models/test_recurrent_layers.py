"""nn.LSTM, nn.GRU and nn.RNN (and their cells) on neuron, in every mode, forward and backward
bit for bit equal to the CPU: the recurrent ops run the CPU's whole op (torchneuron/ops/
recurrent.py), not a cell per time step."""

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

EXACT = dict(rtol=0, atol=0)

MODES = {
    "plain": dict(),
    "two layers": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "batch_first": dict(batch_first=True),
    "two layers bidirectional batch_first": dict(num_layers=2, bidirectional=True,
                                                 batch_first=True),
    "no bias": dict(bias=False),
}
LAYERS = {"LSTM": nn.LSTM, "GRU": nn.GRU, "RNN tanh": nn.RNN,
          "RNN relu": lambda *a, **k: nn.RNN(*a, nonlinearity="relu", **k)}


def _pair(make):
    torch.manual_seed(0)
    cpu = make()
    neuron = make()
    neuron.load_state_dict(cpu.state_dict())
    return cpu, neuron.to("neuron")


def _backward_and_compare(cpu_module, neuron_module, cpu_outputs, neuron_outputs, leaves):
    loss_c = sum(o.square().sum() for o in cpu_outputs)
    loss_n = sum(o.square().sum() for o in neuron_outputs)
    loss_c.backward()
    loss_n.backward()
    for oc, on in zip(cpu_outputs, neuron_outputs):
        torch.testing.assert_close(on.detach().cpu(), oc.detach(), **EXACT)
    for (name, pc), pn in zip(cpu_module.named_parameters(), neuron_module.parameters()):
        assert pn.grad is not None and pn.grad.device.type == "neuron", name
        torch.testing.assert_close(pn.grad.cpu(), pc.grad, **EXACT, msg=name)
    for lc, ln in leaves:
        torch.testing.assert_close(ln.grad.cpu(), lc.grad, **EXACT)


def _flat(outputs):
    out, hidden = outputs
    return [out, *(hidden if isinstance(hidden, tuple) else (hidden,))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layer", LAYERS)
def test_layer_forward_and_backward_bit_for_bit(layer, mode):
    kwargs = MODES[mode]
    cpu, neuron = _pair(lambda: LAYERS[layer](6, 8, **kwargs))
    shape = (3, 5, 6) if kwargs.get("batch_first") else (5, 3, 6)
    x = torch.randn(shape, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    directions = 2 if kwargs.get("bidirectional") else 1
    h = torch.randn(kwargs.get("num_layers", 1) * directions, 3, 8, requires_grad=True)
    hn = h.detach().to("neuron").requires_grad_()
    if layer == "LSTM":
        c = torch.randn_like(h, requires_grad=True)
        cn = c.detach().to("neuron").requires_grad_()
        outs_c, outs_n = cpu(x, (h, c)), neuron(xn, (hn, cn))
        leaves = [(x, xn), (h, hn), (c, cn)]
    else:
        outs_c, outs_n = cpu(x, h), neuron(xn, hn)
        leaves = [(x, xn), (h, hn)]
    assert outs_n[0].device.type == "neuron"
    _backward_and_compare(cpu, neuron, _flat(outs_c), _flat(outs_n), leaves)


def test_lstm_with_projections_bit_for_bit():
    cpu, neuron = _pair(lambda: nn.LSTM(6, 8, num_layers=2, proj_size=3, bidirectional=True))
    x = torch.randn(4, 2, 6, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    _backward_and_compare(cpu, neuron, _flat(cpu(x)), _flat(neuron(xn)), [(x, xn)])


@pytest.mark.parametrize("layer", LAYERS)
def test_packed_sequences_bit_for_bit(layer):
    cpu, neuron = _pair(lambda: LAYERS[layer](6, 8, num_layers=2, bidirectional=True))
    x = torch.randn(5, 3, 6, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    lengths = torch.tensor([5, 3, 2])
    outs = []
    for module, inp in ((cpu, x), (neuron, xn)):
        packed, hidden = module(pack_padded_sequence(inp, lengths))
        padded, _ = pad_packed_sequence(packed)
        outs.append([padded, *(hidden if isinstance(hidden, tuple) else (hidden,))])
    _backward_and_compare(cpu, neuron, outs[0], outs[1], [(x, xn)])


@pytest.mark.parametrize("cell", [nn.LSTMCell, nn.GRUCell, nn.RNNCell])
def test_cells_bit_for_bit(cell):
    cpu, neuron = _pair(lambda: cell(6, 8))
    x = torch.randn(3, 6, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    oc, on = cpu(x), neuron(xn)
    _backward_and_compare(cpu, neuron, list(oc) if isinstance(oc, tuple) else [oc],
                          list(on) if isinstance(on, tuple) else [on], [(x, xn)])


def test_inference_mode_and_no_grad_bit_for_bit():
    cpu, neuron = _pair(lambda: nn.LSTM(6, 8, num_layers=2))
    x = torch.randn(5, 3, 6)
    for mode in (torch.no_grad, torch.inference_mode):  # (the CPU's inference kernel is its own)
        with mode():
            torch.testing.assert_close(neuron(x.to("neuron"))[0].cpu(), cpu(x)[0], **EXACT)


def test_dropout_between_layers_draws_from_the_device_generator():
    """The CPU op's dropout masks come from a seed the device's generator gives: the CPU's
    random stream is untouched, and replaying the device's state replays the masks."""
    _, neuron = _pair(lambda: nn.LSTM(6, 8, num_layers=3, dropout=0.5))
    x = torch.randn(5, 3, 6, device="neuron")
    torch.manual_seed(11)
    cpu_state, device_state = torch.get_rng_state(), torch.neuron.get_rng_state()
    first = neuron(x)[0].cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state)
    assert not torch.equal(neuron(x)[0].cpu(), first)  # new masks
    torch.neuron.set_rng_state(device_state)
    torch.testing.assert_close(neuron(x)[0].cpu(), first, **EXACT)
    neuron.eval()  # no dropout: nothing drawn
    before = torch.neuron.get_rng_state()
    neuron(x)
    assert torch.equal(torch.neuron.get_rng_state(), before)
