"""The fixed sample of architectures the default test suite runs (tests/compat/test_models_sample.py
and `torchneuron compat models --sample`): one or more of each family and of each kind of
attention, position encoding and head, chosen to cover the bug classes the full battery found."""

SAMPLE = (
    "bert", "roberta", "distilbert", "albert", "electra", "deberta-v2",  # encoders
    "gpt2", "llama", "mistral", "qwen2", "gemma", "phi", "gpt_neox", "opt", "mixtral",  # decoders
    "t5", "bart", "marian",  # encoder-decoder
    "whisper", "wav2vec2",  # speech
    "vit", "deit", "resnet", "convnext",  # vision
    "vit_mae",  # draws in forward (random masking): the CPU's draws are given to neuron
    "clip", "aya_vision",  # image-text (CLIP) and image-text-to-text (LLaVA-style)
)
