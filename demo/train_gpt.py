"""`make demo`: trains the small GPT on demo/corpus.txt on neuron and, with the same seed and the
same batches, on CPU; prints both losses side by side, throughput, and the device's memory.
Dropout is off so the two runs are the same computation (neuron draws its own random numbers)."""

from __future__ import annotations

import argparse
import pathlib
import time

import torch

from demo.gpt import GPT

CORPUS = pathlib.Path(__file__).with_name("corpus.txt")


def load_corpus() -> tuple[torch.Tensor, int]:
    """The corpus as character indices, and the vocabulary size."""
    text = CORPUS.read_text()
    chars = sorted(set(text))
    return torch.tensor([chars.index(c) for c in text], dtype=torch.long), len(chars)


def batches(data: torch.Tensor, steps: int, batch: int, block: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        starts = torch.randint(0, len(data) - block - 1, (batch,), generator=gen)
        x = torch.stack([data[s:s + block] for s in starts])
        y = torch.stack([data[s + 1:s + block + 1] for s in starts])
        yield x, y


def train(device: str, data: torch.Tensor, vocab: int, args) -> tuple[list[float], float]:
    torch.manual_seed(args.seed)
    model = GPT(vocab, block=args.block).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    start = time.perf_counter()
    for x, y in batches(data, args.steps, args.batch, args.block, args.seed):
        _, loss = model(x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())  # .item() waits for the device, like a real training loop
    elapsed = time.perf_counter() - start
    return losses, args.steps * args.batch * args.block / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--block", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1337)
    args = parser.parse_args()

    data, vocab = load_corpus()
    print(f"corpus: {len(data)} characters, vocabulary {vocab}; device: "
          f"{torch.neuron.get_device_name()}")

    torch.neuron.reset_peak_memory_stats()
    neuron_losses, neuron_tps = train("neuron", data, vocab, args)
    cpu_losses, cpu_tps = train("cpu", data, vocab, args)

    print(f"\n{'step':>5} {'loss neuron':>12} {'loss cpu':>10} {'|diff|':>9}")
    for i in list(range(0, args.steps, max(1, args.steps // 10))) + [args.steps - 1]:
        print(f"{i:>5} {neuron_losses[i]:>12.4f} {cpu_losses[i]:>10.4f} "
              f"{abs(neuron_losses[i] - cpu_losses[i]):>9.2e}")
    print(f"\nthroughput: neuron {neuron_tps:,.0f} tokens/s, cpu {cpu_tps:,.0f} tokens/s "
          f"(neuron/cpu = {neuron_tps / cpu_tps:.2f})")
    mib = 1 << 20
    free, total = torch.neuron.mem_get_info()
    print(f"neuron memory: allocated {torch.neuron.memory_allocated() / mib:.1f} MiB, peak "
          f"{torch.neuron.max_memory_allocated() / mib:.1f} MiB, reserved "
          f"{torch.neuron.memory_reserved() / mib:.1f} MiB, free {free / mib:,.0f} of "
          f"{total / mib:,.0f} MiB")
    print(torch.neuron.memory_summary(abbreviated=True))


if __name__ == "__main__":
    main()
