"""Fine-tune a BERT sequence classifier with a plain PyTorch loop (no Trainer).
The model is a tiny BERT built from its config and the data is synthetic, so nothing is
downloaded."""
import argparse
import json

import torch
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup
accelerator = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")


def parse_args():
    parser = argparse.ArgumentParser(description="Fine-tune BERT for classification")
    parser.add_argument("--device", type=str,
                        default=accelerator.type if torch.accelerator.is_available() else "cpu")
    parser.add_argument("--fp16", action="store_true", help="mixed precision")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--out", default="hf_results.json")
    return parser.parse_args()


def make_data(n, seq_len, vocab):
    input_ids = torch.randint(1, vocab, (n, seq_len))
    attention_mask = torch.ones(n, seq_len, dtype=torch.long)
    attention_mask[: n // 2, seq_len // 2:] = 0
    labels = (input_ids[:, 0] % 2).long()
    return TensorDataset(input_ids, attention_mask, labels)


def main():
    args = parse_args()
    torch.manual_seed(42)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32,
                        num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config)
    device = torch.device(args.device)
    model.to(device)

    train_loader = DataLoader(make_data(32, 16, config.vocab_size), batch_size=8, shuffle=True)
    eval_batch = make_data(8, 16, config.vocab_size).tensors

    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    total_steps = len(train_loader) * args.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, 2, total_steps)
    scaler = torch.amp.GradScaler(accelerator.type, enabled=args.fp16 and torch.accelerator.is_available())

    losses = []
    model.train()
    for epoch in range(args.epochs):
        for step, (input_ids, attention_mask, labels) in enumerate(train_loader):
            batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.amp.autocast(device_type=accelerator.type, enabled=args.fp16 and torch.accelerator.is_available(), dtype=torch.float16):
                loss = model(**batch).loss
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            if step % 2 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f} "
                      f"max mem {(torch.accelerator.max_memory_allocated() if torch.accelerator.is_available() else 0) / 1e6:.1f} MB")

    model.eval()
    with torch.no_grad():
        ids, mask, _ = (t.to(device) for t in eval_batch)
        logits = model(input_ids=ids, attention_mask=mask).logits
    if torch.accelerator.is_available(): torch.accelerator.empty_cache()
    with open(args.out, "w") as f:
        json.dump({"losses": losses, "logits": logits.cpu().tolist()}, f)


if __name__ == "__main__":
    main()
