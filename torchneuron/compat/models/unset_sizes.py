"""The last shrink profile: sizes the defaults leave unset and every checkpoint sets. Some
config classes default a mixture of experts' sizes to None (Dots1's expert count, DiffusionGemma's
experts, top-k and expert width), the padding id (ESM) or leave per-kind rotary parameters
empty (Cohere Compass):
built from the defaults, such a model does not build at any size. This profile gives them the
battery's tiny values. It comes last because None means "none" in other configs (a dense model
has no experts), which the earlier profiles keep as it is."""

from __future__ import annotations

import re
from typing import Any

from .tiny_sizes import (EXPERT_KEYS, EXPERTS, EXPERTS_PER_TOKEN, HEAD_DIM, HEADS, INTERMEDIATE,
                         TOPK_KEYS)

PROFILE = "unset sizes set"
CLIP_BOUND = 8.0  # DBRX's checkpoints clip queries, keys and values to 8
_CLIP = re.compile(r"^clip_\w+$")
_LAYER_KINDS = re.compile(r"(^|_)layer_types$")
# The kind every model with per-layer kinds knows (transformers' mask and cache kinds).
FULL_ATTENTION = "full_attention"
SLIDING_WINDOW = 4  # shorter than the battery's 8 tokens, so the window cuts
_EXPERT_WIDTH_KEYS = {"moe_intermediate_size", "expert_intermediate_size"}
_SHARED_EXPERT_KEYS = {"n_shared_experts", "num_shared_experts"}
DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def give_unset_sizes(d: dict[str, Any]) -> None:
    """In a shrunk config dict and its sub-config dicts: None expert counts, top-k, expert
    widths and shared-expert counts get tiny values, where the dict has an expert count key
    (so is a mixture of experts); an unset padding id (ESM's embeddings mask it out) takes the
    highest id of the vocabulary no other special token has; a clipping bound left unset
    (DBRX's clip_qkv, which the model clamps to unchecked) gets CLIP_BOUND; per-layer kinds left
    unset get the kinds the config class documents (_give_layer_kinds), and a kept kind's
    own settings left unset tiny values (_give_layer_kind_settings); an unset sliding
    window gets SLIDING_WINDOW; empty
    `rope_parameters` beside `layer_types` get default rotary parameters for each kind of
    layer."""
    for value in d.values():
        if isinstance(value, dict):
            give_unset_sizes(value)
    if any(k in d for k in EXPERT_KEYS):
        for key in d:
            if d[key] is not None:
                continue
            if key in EXPERT_KEYS:
                d[key] = EXPERTS
            elif key in TOPK_KEYS or key == "top_k_experts":
                d[key] = EXPERTS_PER_TOKEN
            elif key in _EXPERT_WIDTH_KEYS:
                d[key] = INTERMEDIATE // 2
            elif key in _SHARED_EXPERT_KEYS:
                d[key] = 1
    vocab = d.get("vocab_size")
    if "pad_token_id" in d and d["pad_token_id"] is None and isinstance(vocab, int):
        taken = {v for k, v in d.items() if k.endswith("_token_id") and isinstance(v, int)}
        d["pad_token_id"] = max(i for i in range(vocab) if i not in taken)
    for key in d:
        if d[key] is None and isinstance(key, str) and _CLIP.match(key):
            d[key] = CLIP_BOUND
    _give_layer_kinds(d)
    _give_layer_kind_settings(d)
    kinds = d.get("layer_types")
    if "sliding_window" in d and d["sliding_window"] is None:
        # Step3p7 makes a sliding-window mask whatever its layer kinds; in the earlier profiles
        # None keeps meaning "no window" (Mistral's full attention).
        d["sliding_window"] = SLIDING_WINDOW
    if d.get("rope_parameters") == {} and isinstance(kinds, list) and kinds \
            and all(isinstance(k, str) for k in kinds):
        d["rope_parameters"] = {kind: dict(DEFAULT_ROPE) for kind in dict.fromkeys(kinds)}


def _documented_kinds(model_type, key: str) -> list[str]:
    """The kinds a config class's docstring lists for `key` (DeepSeek-OCR 2's mlp_layer_types:
    `["dense", "sparse", "sparse", ...]`), in order of first mention."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    known = isinstance(model_type, str) and model_type in CONFIG_MAPPING  # (a lazy mapping: no .get)
    config_class = CONFIG_MAPPING[model_type] if known else None
    doc = (config_class.__doc__ or "") if config_class is not None else ""
    entry = re.search(rf"^\s*{re.escape(key)} \(.*?\n(?P<text>(?:\s{{6,}}.*\n?)*)", doc, re.M)
    example = re.search(r"\[([^\]]*)\]", entry["text"]) if entry else None
    return list(dict.fromkeys(re.findall(r'"(\w+)"', example[1]))) if example else []


def _give_layer_kinds(d: dict[str, Any]) -> None:
    """Per-layer kinds (`layer_types`, `mlp_layer_types`) left None, which models index
    unchecked, get a kind per layer: the kinds the config class documents for them, the first
    for the first layer and the others after it (dense then sparse), else full attention."""
    layers = d.get("num_hidden_layers")
    if not isinstance(layers, int) or layers < 1:
        return
    for key in list(d):
        if d[key] is not None or not isinstance(key, str) or not _LAYER_KINDS.search(key):
            continue
        kinds = _documented_kinds(d.get("model_type"), key)
        if not kinds and key == "layer_types":
            kinds = [FULL_ATTENTION]
        if kinds:
            d[key] = [kinds[0]] + [kinds[min(i, len(kinds) - 1)] for i in range(1, layers)]


# Settings of a kind of layer, by how their names end: its heads (one key head, which the
# grouped kinds divide by), head width, the tokens it keeps and how many it pools into one.
_KIND_SETTINGS = (("_n_heads", HEADS), ("_num_heads", HEADS), ("_kv_heads", 1),
                  ("_head_dim", HEAD_DIM), ("_budget", 4), ("_compress_ratio", 2))


def _give_layer_kind_settings(d: dict[str, Any]) -> None:
    """A kind of layer the tiny model keeps (Qwen4-Exp's "indexed_attention") whose settings,
    named after it ("indexer_n_heads", "indexer_budget"), the defaults all leave unset: the
    layer reads them unchecked, so they get tiny values by what each one is."""
    kinds = d.get("layer_types")
    if not isinstance(kinds, list):
        return
    ordinary = {"full_attention", "sliding_attention", "linear_attention", "attention", "conv"}
    for kind in {k for k in kinds if isinstance(k, str) and k not in ordinary}:
        stem = kind.split("_")[0][:5]  # "indexed" and "indexer" share "index"
        keys = [k for k in d if isinstance(k, str) and k.startswith(stem) and k != "layer_types"]
        if not keys or any(d[k] is not None for k in keys):
            continue  # set by the defaults, or not a group of this kind's settings
        for key in keys:
            d[key] = next((v for end, v in _KIND_SETTINGS if key.endswith(end)), None)
