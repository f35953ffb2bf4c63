"""Every family of neuron's native C++ kernels (csrc/aten/native) under fake tensors with
symbolic sizes: each runs in a function compiled with dynamic=True at two shapes, and in
torch.export with a dynamic dimension, and equals the CPU. (SDPA's own cases are in
test_symbolic_shapes.py; a compiled Hugging Face generate() with changing lengths is below.)"""

import copy

import pytest
import torch
import torch.nn.functional as F

torch.manual_seed(0)
_CONV = torch.nn.Conv2d(3, 4, 3, padding=1)
_LSTM = torch.nn.LSTMCell(6, 5)
_GRU = torch.nn.GRUCell(6, 5)
# The same cells on neuron, made once: moving a module inside a traced function is not the
# point here.
_CELLS = {"cpu": (_LSTM, _GRU),
          "neuron": (copy.deepcopy(_LSTM).to("neuron"), copy.deepcopy(_GRU).to("neuron"))}


def _arith(x):
    return (x + 1.5) * x - x / 3 - 2 * x


def _matmuls(x):
    w = torch.ones(x.shape[-1], 7, device=x.device) * 0.5
    y = x @ w
    return torch.addmm(torch.ones(7, device=x.device), x, w, beta=0.5) + y, \
        torch.bmm(x.unsqueeze(0), w.unsqueeze(0))


def _conv(x):
    return F.conv2d(x, _CONV.weight.to(x.device), _CONV.bias.to(x.device), padding=1)


def _memory(x):
    y = torch.empty_like(x)
    y.copy_(x.t().contiguous().t())
    z = torch.zeros_like(x)
    z.zero_()
    return y.view(-1) + torch.as_strided(x, (x.shape[0],), (x.shape[1],)).sum() + z.sum()


def _dropout_eval(x):
    return F.dropout(x, p=0.3, training=False) + torch.native_dropout(x, 0.0, True)[0]


def _cells(x):
    lstm, gru = _CELLS[x.device.type]
    h, c = lstm(x)
    return h + c + gru(x)


def _histc_and_fill(x):
    return torch.histc(x, bins=5, min=-2, max=2), torch.full_like(x, 3.0).masked_fill(x > 0, 1.0)


CASES = {
    # name: (function, the input's shape at size n, the dimension that varies)
    "arithmetic": (_arith, lambda n: (n, 4), 0),
    "matmul": (_matmuls, lambda n: (n, 8), 0),
    "convolution": (_conv, lambda n: (n, 3, 6, 6), 0),
    "memory": (_memory, lambda n: (n, 3), 0),
    "dropout": (_dropout_eval, lambda n: (n, 4), 0),
    "rnn_cells": (_cells, lambda n: (n, 6), 0),
    "histc_fill": (_histc_and_fill, lambda n: (n, 4), 0),
}


def _to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    return type(obj)(_to(o, device) for o in obj)


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_with_dynamic_shapes_equals_cpu(name):
    fn, shape, _ = CASES[name]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="neuron", dynamic=True, fullgraph=False)
    for n in (3, 7):
        x = torch.randn(*shape(n))
        with torch.no_grad():
            torch.testing.assert_close(_to(compiled(x.to("neuron")), "cpu"), fn(x),
                                       rtol=1e-5, atol=1e-5)


class _Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("name", sorted(set(CASES) - {"histc_fill"}))
def test_export_with_a_dynamic_dimension_equals_cpu(name):
    # histc's output size is data-independent but its kernel checks min/max on data: export
    # keeps it in the compiled test only.
    fn, shape, dim = CASES[name]
    n_dim = torch.export.Dim("n", min=2, max=64)
    with torch.no_grad():
        exported = torch.export.export(_Wrap(fn), (torch.randn(*shape(4), device="neuron"),),
                                       dynamic_shapes={"x": {dim: n_dim}})
        for n in (3, 9):
            x = torch.randn(*shape(n))
            torch.testing.assert_close(_to(exported.module()(x.to("neuron")), "cpu"), fn(x),
                                       rtol=1e-5, atol=1e-5)


def test_compiled_training_step_with_two_batch_sizes_equals_cpu():
    def step(model, x):
        loss = model(x).square().mean()
        loss.backward()
        return loss

    torch.manual_seed(1)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    model.load_state_dict(cpu_model.state_dict())
    model.to("neuron")
    torch._dynamo.reset()
    compiled = torch.compile(step, backend="neuron")
    for batch in (4, 9, 13):
        x = torch.randn(batch, 8)
        model.zero_grad()
        cpu_model.zero_grad()
        torch.testing.assert_close(compiled(model, x.to("neuron")).cpu(), step(cpu_model, x))
        torch.testing.assert_close(model[0].weight.grad.cpu(), cpu_model[0].weight.grad)


@pytest.mark.slow  # ~55 s: one compile per new length on 2 cores
def test_compiled_hf_causal_lm_generate_with_changing_lengths():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    cpu_model = transformers.LlamaForCausalLM(config).eval()
    model = transformers.LlamaForCausalLM(config).eval()
    model.load_state_dict(cpu_model.state_dict())
    model.to("neuron")
    torch._dynamo.reset()
    model.forward = torch.compile(model.forward, backend="neuron")
    for prompt_length, new_tokens in ((5, 4), (9, 6), (3, 7)):
        ids = torch.randint(0, 64, (2, prompt_length))
        with torch.no_grad():
            got = model.generate(ids.to("neuron"), max_new_tokens=new_tokens, do_sample=False,
                                 pad_token_id=0)
            expected = cpu_model.generate(ids, max_new_tokens=new_tokens, do_sample=False,
                                          pad_token_id=0)
        torch.testing.assert_close(got.cpu(), expected)
