"""Which architectures the model battery tries: every model type the installed transformers
registers in its auto mappings, each paired with the one head class that exercises the most
(generation beats a plain forward), and the family it is charted under."""

from __future__ import annotations

from dataclasses import dataclass

# (auto mapping, family), in order of preference: the first mapping that knows a model type
# gives its head class. Generative heads come first because they add the generate() stage;
# encoder-decoder before causal LM, since BART- and Whisper-like types register both and the full model
# exercises more (encoder, cross-attention).
HEADS = (
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "encoder-decoder LM"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech"),
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "decoder LM"),
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "multimodal"),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "encoder (masked LM)"),
    ("MODEL_FOR_CTC_MAPPING_NAMES", "speech"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "vision"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "text classification"),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "text classification"),
    ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "speech"),
    ("MODEL_MAPPING_NAMES", "base / other"),
)

# The head each mapping stands for, which decides the labels of the training step.
HEAD_KIND = {
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES": "causal_lm",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES": "seq2seq_lm",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES": "seq2seq_lm",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES": "causal_lm",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES": "masked_lm",
    "MODEL_FOR_CTC_MAPPING_NAMES": "ctc",
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES": "sequence_classification",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES": "sequence_classification",
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES": "token_classification",
    "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES": "sequence_classification",
    "MODEL_MAPPING_NAMES": "base",
}


@dataclass(frozen=True)
class Architecture:
    model_type: str
    class_name: str
    head: str  # a HEAD_KIND value
    family: str


def _first_name(value) -> str:
    # A mapping value is a class name, or a tuple of names for types with several base classes.
    return value if isinstance(value, str) else value[0]


def architectures() -> list[Architecture]:
    """Every registered model type, sorted, with its preferred head."""
    from transformers.models.auto import modeling_auto

    chosen: dict[str, Architecture] = {}
    for mapping_name, family in HEADS:
        for model_type, names in getattr(modeling_auto, mapping_name).items():
            if model_type not in chosen:
                chosen[model_type] = Architecture(
                    model_type, _first_name(names), HEAD_KIND[mapping_name], family)
    return [chosen[t] for t in sorted(chosen)]


def by_type(model_type: str) -> Architecture:
    for arch in architectures():
        if arch.model_type == model_type:
            return arch
    raise KeyError(f"transformers registers no model type {model_type!r} in its auto mappings")
