"""Native kernels under torch.compile and torch.export see fake tensors with symbolic sizes:
scaled_dot_product_attention's kernel choice reads only metadata, so a compiled function with a
second sequence length, dynamic=True, and torch.export with Dim on batch and sequence work and
match the CPU."""

import pytest
import torch
import torch.nn.functional as F


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("dynamic", [None, True])
def test_compiled_sdpa_with_two_sequence_lengths(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(attention, backend="neuron", dynamic=dynamic)
    for length in (8, 12, 20):
        q, k, v = (torch.randn(2, 2, length, 16) for _ in range(3))
        out = compiled(q.to("neuron"), k.to("neuron"), v.to("neuron"))
        torch.testing.assert_close(out.cpu(), attention(q, k, v))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, 16)


def test_export_with_dynamic_batch_and_sequence():
    torch.manual_seed(0)
    block = Block()
    batch, seq = torch.export.Dim("batch", max=64), torch.export.Dim("seq", min=2, max=256)
    exported = torch.export.export(block.to("neuron"), (torch.randn(2, 8, 16, device="neuron"),),
                                   dynamic_shapes={"x": {0: batch, 1: seq}})
    cpu_block = Block()
    cpu_block.load_state_dict({k: v.cpu() for k, v in block.state_dict().items()})
    for shape in ((2, 8), (3, 17)):
        x = torch.randn(*shape, 16)
        torch.testing.assert_close(exported.module()(x.to("neuron")).cpu(), cpu_block(x))


def test_learned_mask_with_gradient_keeps_the_cpus_choice():
    q = torch.randn(1, 2, 8, 16, requires_grad=True)
    mask = torch.randn(1, 2, 8, 8, requires_grad=True)
    qn = q.detach().to("neuron").requires_grad_()
    mn = mask.detach().to("neuron").requires_grad_()
    F.scaled_dot_product_attention(qn, qn, qn, attn_mask=mn).sum().backward()
    F.scaled_dot_product_attention(q, q, q, attn_mask=mask).sum().backward()
    torch.testing.assert_close(qn.grad.cpu(), q.grad)
    torch.testing.assert_close(mn.grad.cpu(), mask.grad)
