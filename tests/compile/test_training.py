"""Compiled training on neuron (AOTAutograd forward and backward graphs, both generated as neuron
kernels): outputs and every gradient equal eager neuron's and the CPU's."""

import pytest
import torch

from compile_helpers import compare_training_step
from compile_models import CNN, MLP, TransformerBlock, cnn_input, mlp_input, transformer_input


def test_mlp():
    compare_training_step(MLP(), mlp_input())


def test_cnn_with_batchnorm_in_training_mode():
    compare_training_step(CNN(), cnn_input())


def test_cnn_inference_single_threaded():
    # With one thread the CPU picks other convolution kernels (and layouts) than with several;
    # the layout plan must follow (compile/conv_layout.py), or the stride check fails.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, x = CNN().eval(), cnn_input()
        on_neuron = CNN().eval().neuron()
        on_neuron.load_state_dict(model.state_dict())
        compiled = torch.compile(on_neuron, backend="neuron")
        with torch.no_grad():
            torch.testing.assert_close(compiled(x.neuron()).cpu(), model(x))
    finally:
        torch.set_num_threads(threads)


def test_transformer_block_with_sdpa():
    compare_training_step(TransformerBlock(), transformer_input())


def test_optimizer_steps_track_eager():
    torch.manual_seed(0)
    model = MLP()
    x, y = mlp_input().neuron(), torch.randint(0, 8, (16,)).neuron()
    runs = {}
    for name, compile_ in (("eager", False), ("compiled", True)):
        m = MLP().neuron()
        m.load_state_dict(model.state_dict())
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        step_model = torch.compile(m, backend="neuron") if compile_ else m
        losses = []
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(step_model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        runs[name] = torch.tensor(losses)
    assert runs["compiled"][-1] < runs["compiled"][0]
    torch.testing.assert_close(runs["compiled"], runs["eager"])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_autocast_inside_compiled_training_step(dtype):
    eager = MLP().neuron()
    compiled_model = MLP().neuron()
    compiled_model.load_state_dict(eager.state_dict())
    compiled = torch.compile(compiled_model, backend="neuron")
    x = mlp_input().neuron()
    with torch.autocast("neuron", dtype=dtype):
        out_c, out_e = compiled(x), eager(x)
    assert out_c.dtype == out_e.dtype == dtype  # the last Linear runs in low precision
    torch.testing.assert_close(out_c, out_e, rtol=2e-2, atol=2e-2)
    out_c.float().sum().backward()
    out_e.float().sum().backward()
    for (name, pc), pe in zip(compiled_model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(pc.grad, pe.grad, rtol=5e-2, atol=5e-2, msg=name)
