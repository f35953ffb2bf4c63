"""Mixed precision the CUDA way: `torch.cuda.amp.autocast()` (float16) with its GradScaler,
both switched on where CUDA is."""
import argparse
import json

import torch
import torch.nn as nn


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default="amp.json")
    return parser.parse_args()


def main():
    accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    args = get_args()
    torch.manual_seed(0)
    use_cuda = torch.accelerator.is_available()
    device = torch.device(accelerator.type if use_cuda else "cpu")
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(accelerator.type, enabled=use_cuda and torch.accelerator.is_available())
    data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(args.steps)]
    losses, dtypes = [], set()
    for x, y in data:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with torch.amp.autocast(device_type=accelerator.type, dtype=torch.float16, enabled=torch.accelerator.is_available()):
            out = model(x)
            dtypes.add(str(out.dtype))
            loss = nn.functional.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    with open(args.out, "w") as f:
        json.dump({"losses": losses}, f)
    with open(args.out + ".precision.json", "w") as f:
        json.dump({"dtypes": sorted(dtypes), "scale": scaler.get_scale()}, f)


if __name__ == "__main__":
    main()
