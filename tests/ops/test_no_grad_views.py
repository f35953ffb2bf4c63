"""A view made in no-grad mode of a neuron tensor that requires grad behaves as on the CPU: it
reads requires_grad=True but autograd gives it no gradient of its own (None), while the other
inputs get the CPU's gradients. istft's OpInfo passes its window as such a view
(`window=window[:8]`, and `window.real[:8]` for a complex window)."""

import pytest
import torch


def _istft_grads(device, window_view, n_fft, win_length, return_complex):
    torch.manual_seed(0)
    spectrum = torch.randn(10, n_fft // 2 + 1 if not return_complex else n_fft, 6,
                           dtype=torch.complex64)
    window = torch.rand(10, dtype=torch.complex64) + 0.5
    x = spectrum.to(device).requires_grad_()
    w = window.to(device).requires_grad_()
    with torch.no_grad():
        view = window_view(w)
    assert view.requires_grad and view.grad_fn is None
    out = torch.istft(x, n_fft=n_fft, win_length=win_length, window=view, center=True,
                      onesided=not return_complex, return_complex=return_complex)
    grad_out = torch.randn(out.shape, dtype=out.dtype).to(device)
    grads = torch.autograd.grad([out], [x, view], [grad_out], allow_unused=True)
    return out, grads


@pytest.mark.parametrize("case", [
    # (the window view, n_fft, win_length, return_complex): the OpInfo's two samples
    (lambda w: w[:8], 10, 8, True),
    (lambda w: w.real[:8], 8, None, False),
], ids=["complex_window_slice", "real_part_slice"])
def test_istft_window_view_made_without_grad_matches_cpu(case):
    view, n_fft, win_length, return_complex = case
    cpu_out, cpu_grads = _istft_grads("cpu", view, n_fft, win_length, return_complex)
    out, grads = _istft_grads("neuron", view, n_fft, win_length, return_complex)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), cpu_out)
    torch.testing.assert_close(grads[0].cpu(), cpu_grads[0])
    assert cpu_grads[1] is None and grads[1] is None


def test_a_no_grad_view_gets_no_gradient_as_on_cpu():
    def grads(device):
        torch.manual_seed(0)
        leaf = torch.randn(6).to(device).requires_grad_()
        with torch.no_grad():
            view = leaf[1:4]
        used = torch.randn(3).to(device).requires_grad_()
        y = (view * used).sum()
        return y, torch.autograd.grad(y, [leaf, view, used], allow_unused=True)

    cpu_y, cpu = grads("cpu")
    y, got = grads("neuron")
    torch.testing.assert_close(y.cpu(), cpu_y)
    assert [g is None for g in got] == [g is None for g in cpu] == [True, True, False]
    torch.testing.assert_close(got[2].cpu(), cpu[2])
