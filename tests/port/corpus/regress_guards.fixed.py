"""A classifier trainer in the shape many examples have: the device picked once, and CUDA-only
extras (DataParallel over several GPUs, a synchronized step timer, peak-memory statistics, a
fused optimizer) behind tests of the device."""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default="guards.json")
    return parser.parse_args()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def configure_optimizer(model, device_type):
    # callers pass the device itself ("cuda:0"), so this is never fused, even on CUDA
    fused = device_type == "cuda"
    return torch.optim.AdamW(model.parameters(), lr=1e-2, fused=fused)


def main():
    args = get_args()
    torch.manual_seed(0)
    device = torch.device(torch.accelerator.current_accelerator(check_available=True).type if torch.accelerator.is_available() else "cpu")
    model = Net()
    if device.type == "cuda":
        model.cuda(device)
    else:
        model.to(device)
    if device.type != "cpu" and torch.accelerator.device_count() > 1:
        model = nn.DataParallel(model)
    optimizer = configure_optimizer(model, str(device))
    data = [(torch.randn(16, 20), torch.randint(0, 4, (16,))) for _ in range(args.steps)]

    losses, step_times = [], []
    for x, y in data:
        x, y = x.to(device), y.to(device)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if device.type != "cpu":
            torch.accelerator.synchronize()
        step_times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    print(f"mean step {1e3 * sum(step_times) / len(step_times):.2f} ms")

    with torch.no_grad():
        probe = torch.randn(8, 20).to(device)
        net = model.module if isinstance(model, nn.DataParallel) else model
        if torch.accelerator.device_count() > 1:
            out = nn.parallel.data_parallel(net, probe)
        else:
            out = net(probe)
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "probe": out.cpu().tolist()}, f)


if __name__ == "__main__":
    main()
