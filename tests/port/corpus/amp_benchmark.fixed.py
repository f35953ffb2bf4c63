"""Mixed-precision training of a small MLP, with the usual speed and memory report."""
import argparse
import json
import time

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--out", default="amp_results.json")
    return parser.parse_args()


def main():
    accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    args = get_args()
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(args.width, 4 * args.width),
        nn.GELU(),
        nn.Linear(4 * args.width, args.width),
        nn.LayerNorm(args.width),
        nn.Linear(args.width, 1),
    ).to(accelerator)
    if args.compile:
        model = torch.compile(model, mode="max-autotune")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(accelerator.type, enabled=torch.accelerator.is_available())
    data = [(torch.randn(args.batch, args.width), torch.randn(args.batch, 1))
            for _ in range(args.steps)]

    if torch.accelerator.is_available(): torch.accelerator.reset_peak_memory_stats()
    if torch.accelerator.is_available(): torch.accelerator.synchronize()
    t0 = time.perf_counter()
    losses = []
    for x, y in data:
        x, y = x.to(accelerator, non_blocking=True), y.to(accelerator, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.amp.autocast(device_type=accelerator.type, dtype=torch.bfloat16, enabled=torch.accelerator.is_available()):
            loss = nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.append(loss.item())
    if torch.accelerator.is_available(): torch.accelerator.synchronize()
    elapsed = time.perf_counter() - t0

    if torch.accelerator.is_available():
        start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
        start.record()
        model(data[0][0].to(accelerator))
        end.record()
        end.synchronize()
        print(f"one forward: {start.elapsed_time(end):.3f} ms")

    peak = (torch.accelerator.max_memory_allocated() if torch.accelerator.is_available() else 0) / 2**20
    print(f"{args.steps / elapsed:.1f} steps/s, peak memory {peak:.1f} MiB")
    if torch.accelerator.is_available(): torch.accelerator.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"losses": losses}, f)


if __name__ == "__main__":
    main()
