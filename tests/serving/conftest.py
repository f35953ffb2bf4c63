"""Serving tests share one tiny local Llama (torchneuron/serving/tiny_model.py) and the reference
it is held to: Hugging Face `generate()` on the CPU. The vLLM tests run in the serving
environment (`make test-serve`) and skip where vLLM is not importable; they start at most one
vLLM engine at a time, and every server they start listens on 127.0.0.1 and is stopped by its
fixture, whatever the test's outcome."""

from __future__ import annotations

import pathlib

import pytest
from serving_common import MAX_TOKENS

from torchneuron.serving import tiny_model


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> pathlib.Path:
    return tiny_model.build(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tokenizer(model_dir):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="session")
def hf_greedy(model_dir):
    """`hf_greedy(prompt_ids, n)`: the n tokens greedy decoding picks on the CPU, run past the
    end-of-sequence token (as vLLM's ignore_eos does), cached per prompt."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    cache: dict[tuple[tuple[int, ...], int], list[int]] = {}

    def generate(prompt_ids: list[int], n: int = MAX_TOKENS) -> list[int]:
        key = (tuple(prompt_ids), n)
        if key not in cache:
            ids = torch.tensor([prompt_ids])
            # No end-of-sequence token: the same n tokens as vLLM's ignore_eos.
            config = GenerationConfig(do_sample=False, max_new_tokens=n, eos_token_id=None,
                                      pad_token_id=model.config.pad_token_id)
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids),
                                     generation_config=config)
            cache[key] = out[0, len(prompt_ids):].tolist()
        return cache[key]

    return generate
