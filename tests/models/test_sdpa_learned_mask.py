"""Bug class found by the model battery (T5, and every model with a learned attention bias):
scaled_dot_product_attention on neuron chose the CPU flash kernel from CPU aliases that had lost
requires_grad, and flash has no gradient for the mask, so backward raised "not differentiable
with respect to argument 'attn_mask'". The CPU picks the math kernel there; neuron must too."""

import torch
import torch.nn.functional as F


def _sdpa_grads(device: str, q, k, v, mask):
    leaves = [t.detach().to(device).requires_grad_(True) for t in (q, k, v, mask)]
    out = F.scaled_dot_product_attention(*leaves[:3], attn_mask=leaves[3])
    out.pow(2).sum().backward()
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


def test_sdpa_with_learned_mask_backward_matches_cpu():
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    mask = torch.randn(1, 3, 5, 5)
    out_cpu, grads_cpu = _sdpa_grads("cpu", q, k, v, mask)
    out_dev, grads_dev = _sdpa_grads("neuron", q, k, v, mask)
    torch.testing.assert_close(out_dev, out_cpu)
    for g_dev, g_cpu in zip(grads_dev, grads_cpu):
        torch.testing.assert_close(g_dev, g_cpu)


def test_fused_sdp_choice_sees_requires_grad_like_the_cpu():
    q = torch.randn(1, 2, 4, 8, requires_grad=True)
    mask = torch.randn(1, 2, 4, 4, requires_grad=True)
    qn, maskn = q.detach().to("neuron").requires_grad_(), mask.detach().to("neuron").requires_grad_()
    assert torch._fused_sdp_choice(qn, qn, qn, maskn) == torch._fused_sdp_choice(q, q, q, mask)
    with torch.no_grad():
        assert torch._fused_sdp_choice(qn, qn, qn) == torch._fused_sdp_choice(q, q, q)
