"""Training on neuron reproduces the CPU run: same seed, same data, same losses."""

import torch


def _train(make_model, make_batch, device, steps=20):
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    # One fixed batch, so that falling loss is a property of the optimizer, not of the data.
    x, y = make_batch(torch.Generator().manual_seed(1))
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def _mlp_batch(gen):
    return torch.randn(32, 16, generator=gen), torch.randint(0, 4, (32,), generator=gen)


def _cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 3))


def _cnn_batch(gen):
    return torch.randn(8, 1, 12, 12, generator=gen), torch.randint(0, 3, (8,), generator=gen)


def test_mlp_adamw_matches_cpu():
    cpu_losses, cpu_model = _train(_mlp, _mlp_batch, "cpu")
    dev_losses, dev_model = _train(_mlp, _mlp_batch, "neuron")
    torch.testing.assert_close(dev_losses, cpu_losses)
    assert dev_losses[-1] < dev_losses[0]
    for p, q in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.cpu(), q)


def test_cnn_adamw_matches_cpu():
    cpu_losses, _ = _train(_cnn, _cnn_batch, "cpu")
    dev_losses, _ = _train(_cnn, _cnn_batch, "neuron")
    torch.testing.assert_close(dev_losses, cpu_losses)
    assert dev_losses[-1] < dev_losses[0]
