"""Tiny random-weight models and data for the ecosystem scripts (imported inside the fresh
processes): a Llama saved with its offline-built tokenizer, a fixed token dataset, and what the
run left on the device."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


def llama_folder(folder, hidden_size: int = 32, num_layers: int = 2) -> str:
    """A Llama (hidden size 32 and 2 layers: ~0.2 MiB of float32 weights; 128 and 4: ~2.8 MiB)
    and its byte-level BPE tokenizer, saved in `folder`."""
    from torchneuron.serving.tiny_model import build

    return str(build(folder, hidden_size=hidden_size, num_layers=num_layers))


def llama(vocab_size: int = 64):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    return LlamaForCausalLM(config)


class Tokens(Dataset):
    """16 fixed sequences of 8 tokens, labels = inputs (causal LM)."""

    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def device_report(module=None) -> dict:
    """Where the parameters live and how much neuron memory the run used (peak, and now)."""
    out = {"neuron_peak": torch.neuron.max_memory_allocated() if torch.neuron.is_initialized()
           else 0,
           "neuron_initialized": torch.neuron.is_initialized()}
    if module is not None:
        out["param_devices"] = sorted({str(p.device) for p in module.parameters()})
    return out
