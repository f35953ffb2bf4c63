"""PEFT methods (LoRA, DoRA, IA3, prefix tuning, prompt tuning) on three tiny architectures
(a decoder LM, an encoder classifier, an encoder-decoder LM), built from configs with random
weights. Stages: "train" (a few AdamW steps: every step's loss and the trained adapter weights
against the CPU) and "merge" (methods that merge: merge_and_unload()'s plain model gives the
adapted model's outputs, on each device, and equals the CPU's)."""

from __future__ import annotations

import torch

from ..staged import Case

STEPS = 3
BATCH, SEQ = 2, 8
VOCAB = 128
# (name, PEFT task type, how to build the tiny model)
ARCHITECTURES = ("decoder", "encoder", "encoder-decoder")
METHODS = ("lora", "dora", "ia3", "prefix_tuning", "prompt_tuning")
MERGEABLE = {"lora", "dora", "ia3"}


def _model(arch: str):
    import transformers as t

    if arch == "decoder":
        return t.LlamaForCausalLM(t.LlamaConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    if arch == "encoder":
        return t.BertForSequenceClassification(t.BertConfig(
            vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, max_position_embeddings=64, num_labels=3,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return t.T5ForConditionalGeneration(t.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, dropout_rate=0.0, decoder_start_token_id=0))


def _task(arch: str):
    from peft import TaskType

    return {"decoder": TaskType.CAUSAL_LM, "encoder": TaskType.SEQ_CLS,
            "encoder-decoder": TaskType.SEQ_2_SEQ_LM}[arch]


def _peft_config(method: str, arch: str):
    import peft

    task = _task(arch)
    if method in ("lora", "dora"):
        return peft.LoraConfig(task_type=task, r=4, lora_alpha=8, lora_dropout=0.0,
                               use_dora=method == "dora", init_lora_weights=False)
    if method == "ia3":
        return peft.IA3Config(task_type=task, init_ia3_weights=False)
    if method == "prefix_tuning":
        return peft.PrefixTuningConfig(task_type=task, num_virtual_tokens=4)
    return peft.PromptTuningConfig(task_type=task, num_virtual_tokens=4)


def _batch(arch: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, VOCAB, (BATCH, SEQ), generator=g)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if arch == "decoder":
        batch["labels"] = ids.clone()
    elif arch == "encoder":
        batch["labels"] = torch.randint(3, (BATCH,), generator=g)
    else:
        batch["labels"] = torch.randint(4, VOCAB, (BATCH, 5), generator=g)
    return batch


def _logits(model, batch) -> torch.Tensor:
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    if "decoder_input_ids" not in inputs and model.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = batch["labels"]
    with torch.no_grad():
        return model(**inputs).logits


def run(method: str, arch: str, device: str):
    import peft

    base = _model(arch)
    model = peft.get_peft_model(base, _peft_config(method, arch)).to(device)
    batch = {k: v.to(device) for k, v in _batch(arch).items()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    losses = []
    model.train()
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    model.eval()
    yield "train", [("losses", torch.stack(losses))] + [
        (n, p.detach()) for n, p in model.named_parameters() if p.requires_grad]
    if method in MERGEABLE:
        adapted = _logits(model, batch)
        merged = _logits(model.merge_and_unload(), batch)
        torch.testing.assert_close(merged, adapted, atol=1e-4, rtol=1e-4,
                                   msg=lambda m: f"merged model differs from the adapted one: {m}")
        yield "merge", merged


def cases() -> list[Case]:
    def case(method: str, arch: str) -> Case:
        stages = ("train", "merge") if method in MERGEABLE else ("train",)
        return Case(f"{method} / {arch}", method, lambda device: run(method, arch, device), stages)

    return [case(m, a) for m in METHODS for a in ARCHITECTURES]
