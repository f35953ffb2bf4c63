"""A tiny Llama with a tokenizer built offline, saved as a local model folder that vLLM,
`transformers serve` and Hugging Face `generate()` all load. Nothing is downloaded: the
tokenizer is a byte-level BPE trained on the text below, the weights are seeded random.

    python -m torchneuron.serving.tiny_model <folder>
"""

from __future__ import annotations

import pathlib
import sys

# Plain English for the BPE merges; any text still encodes (byte-level), this only decides how
# many tokens a prompt becomes.
_CORPUS = """\
The device trains and the same device serves. A model learns from text, and then it answers
questions one token at a time. Each request brings a prompt; the server reads it, keeps the keys
and values of every layer in a cache, and writes the answer back while other requests wait in the
same batch. Short prompts and long prompts share the engine. The scheduler decides which requests
run in the next step, how many tokens each one may take, and which blocks of the cache it owns.
When two prompts begin with the same words, the cache keeps one copy of their blocks. A long
prompt is read in chunks, so a short one never waits too long behind it. Tell me a story about a
river that runs through a quiet town. Write a poem about the sea, the wind and the morning light.
What is the capital of France? Paris is the capital of France. How many days are in a week?
Seven days are in a week. Explain how a cache works in simple words. Count from one to ten: one,
two, three, four, five, six, seven, eight, nine, ten. The quick brown fox jumps over the lazy dog.
"""

_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

VOCAB_SIZE = 512
MAX_POSITIONS = 512


def build_tokenizer(vocab_size: int = VOCAB_SIZE):
    """A byte-level BPE tokenizer with <s>, </s> and a chat template, trained here."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    bos = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   pad_token="</s>", chat_template=_CHAT_TEMPLATE,
                                   model_max_length=MAX_POSITIONS)


def build(folder: str | pathlib.Path, *, seed: int = 0, hidden_size: int = 128,
          num_layers: int = 2, num_heads: int = 4, num_kv_heads: int = 2,
          max_positions: int = MAX_POSITIONS) -> pathlib.Path:
    """Saves the tokenizer and a float32 Llama (head size 32, grouped-query attention) into
    `folder`, and returns it. The same seed gives the same weights, bit for bit."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    folder = pathlib.Path(folder)
    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads, max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False,
        # Random weights with the usual 0.02 give logits so flat that the greedy token is a
        # near-tie; a wider spread makes the argmax a property of the model, not of rounding.
        initializer_range=0.2, torch_dtype="float32")
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id,
                                               eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m torchneuron.serving.tiny_model <folder>")
    print(build(sys.argv[1]))
