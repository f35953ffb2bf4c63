"""A small GPT trained the nanoGPT way, with the DDP tutorial's Trainer that snapshots and
resumes: the device-type idiom that decides autocast and fused AdamW, a bf16 check, seeding,
a checkpoint loaded with map_location built in an f-string, and an integer device."""
import argparse
import inspect
import json
import os
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.MultiheadAttention(n_embd, n_head, batch_first=True)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x):
        h = self.ln_1(x)
        mask = torch.triu(torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device), 1)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=64, block_size=16, n_embd=32, n_head=4, n_layer=2):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))

    def configure_optimizers(self, learning_rate, device_type):
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type != 'cpu'
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(self.parameters(), lr=learning_rate, **extra_args), use_fused


class Trainer:
    def __init__(self, model, optimizer, gpu_id: int, ctx, scaler, snapshot_path):
        self.gpu_id = gpu_id
        self.model = model.to(torch.device(accelerator.type, gpu_id))
        self.optimizer = optimizer
        self.ctx = ctx
        self.scaler = scaler
        self.steps_run = 0
        if os.path.exists(snapshot_path):
            self._load_snapshot(snapshot_path)

    def _load_snapshot(self, snapshot_path):
        loc = f"{accelerator.type}:{self.gpu_id}" if torch.accelerator.is_available() else "cpu"
        snapshot = torch.load(snapshot_path, map_location=loc)
        self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.optimizer.load_state_dict(snapshot["OPTIMIZER_STATE"])
        self.steps_run = snapshot["STEPS_RUN"]

    def save_snapshot(self, snapshot_path):
        torch.save({"MODEL_STATE": self.model.state_dict(),
                    "OPTIMIZER_STATE": self.optimizer.state_dict(),
                    "STEPS_RUN": self.steps_run}, snapshot_path)

    def step(self, x, y, device_type):
        if device_type != 'cpu':
            x = x.pin_memory().to(torch.device(accelerator.type, self.gpu_id), non_blocking=True)
            y = y.pin_memory().to(torch.device(accelerator.type, self.gpu_id), non_blocking=True)
        else:
            x, y = x.to(torch.device(accelerator.type, self.gpu_id)), y.to(torch.device(accelerator.type, self.gpu_id))
        with self.ctx:
            loss = self.model(x, y)
            mixed = torch.is_autocast_enabled(x.device.type)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.steps_run += 1
        return loss.item(), mixed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--out", default="gpt_results.json")
    args = parser.parse_args()

    seed = 1337
    torch.manual_seed(seed)
    device = accelerator.type
    device_type = device  # for later use in torch.autocast
    dtype = 'bfloat16' if torch.accelerator.is_available() and torch.get_device_module().is_bf16_supported() else 'float16'
    ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
    ctx = nullcontext() if device_type == 'cpu' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)
    scaler = torch.amp.GradScaler(accelerator.type, enabled=(dtype == 'float16') and torch.accelerator.is_available())
    gpu_id = int(os.environ.get("LOCAL_RANK", 0))

    data = torch.randint(0, 64, (args.steps, 4, 17))
    snapshot_path = args.out + ".snapshot.pt"
    if os.path.exists(snapshot_path):
        os.remove(snapshot_path)
    losses, mixed = [], []
    for part in range(2):  # train half, snapshot, resume in a fresh Trainer, train the rest
        torch.manual_seed(seed + part)
        model = GPT()
        optimizer, fused = model.to(device).configure_optimizers(1e-2, device_type)
        trainer = Trainer(model, optimizer, gpu_id, ctx, scaler, snapshot_path)
        for batch in data[trainer.steps_run:(part + 1) * args.steps // 2]:
            loss, autocast_on = trainer.step(batch[:, :-1], batch[:, 1:], device_type)
            losses.append(loss)
            mixed.append(autocast_on)
        trainer.save_snapshot(snapshot_path)
    os.remove(snapshot_path)
    print(f"device type {device_type}, {dtype}, fused AdamW {fused}, autocast {all(mixed)}")
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "steps_run": trainer.steps_run}, f)
    with open(args.out + ".precision.json", "w") as f:
        json.dump({"device_type": device_type, "dtype": dtype, "fused": fused,
                   "autocast": all(mixed)}, f)


if __name__ == "__main__":
    main()
