"""Seeding as training scripts do it: every generator from one seed, CUDA's only where CUDA
is, then a small model with dropout trained from a shuffled DataLoader."""
import argparse
import json
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default="seed.json")
    return parser.parse_args()


def set_seed(seed):
    random.seed(seed)
    torch.manual_seed(seed)


def reseed_cuda(seed):
    if torch.accelerator.is_available():
        torch.get_device_module().manual_seed(seed)


def main():
    args = get_args()
    set_seed(args.seed)
    device = torch.device(torch.accelerator.current_accelerator(check_available=True).type if torch.accelerator.is_available() else "cpu")
    data = TensorDataset(torch.randn(64, 12), torch.randn(64, 1))
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 1))
    model = model.to(device)
    reseed_cuda(args.seed + 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "weight": model[0].weight.detach().cpu().sum().item()}, f)


if __name__ == "__main__":
    main()
