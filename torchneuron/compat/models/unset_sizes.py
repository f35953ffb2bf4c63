"""The last shrink profile: sizes the defaults leave unset and every checkpoint sets. Some
config classes default a mixture of experts' sizes to None (Dots1's expert count, DiffusionGemma's
experts, top-k and expert width), the padding id (ESM) or leave per-kind rotary parameters
empty (Cohere Compass):
built from the defaults, such a model does not build at any size. This profile gives them the
battery's tiny values. It comes last because None means "none" in other configs (a dense model
has no experts), which the earlier profiles keep as it is."""

from __future__ import annotations

from typing import Any

from .shrink import EXPERTS, EXPERTS_PER_TOKEN, INTERMEDIATE, _EXPERT_KEYS, _TOPK_KEYS

PROFILE = "unset sizes set"
_EXPERT_WIDTH_KEYS = {"moe_intermediate_size", "expert_intermediate_size"}
_SHARED_EXPERT_KEYS = {"n_shared_experts", "num_shared_experts"}
DEFAULT_ROPE = {"rope_type": "default", "rope_theta": 10000.0}


def give_unset_sizes(d: dict[str, Any]) -> None:
    """In a shrunk config dict and its sub-config dicts: None expert counts, top-k, expert
    widths and shared-expert counts get tiny values, where the dict has an expert count key
    (so is a mixture of experts); an unset padding id (ESM's embeddings mask it out) takes the
    highest id of the vocabulary no other special token has; empty `rope_parameters` beside
    `layer_types` get default rotary parameters for each kind of layer."""
    for value in d.values():
        if isinstance(value, dict):
            give_unset_sizes(value)
    if any(k in d for k in _EXPERT_KEYS):
        for key in d:
            if d[key] is not None:
                continue
            if key in _EXPERT_KEYS:
                d[key] = EXPERTS
            elif key in _TOPK_KEYS or key == "top_k_experts":
                d[key] = EXPERTS_PER_TOKEN
            elif key in _EXPERT_WIDTH_KEYS:
                d[key] = INTERMEDIATE // 2
            elif key in _SHARED_EXPERT_KEYS:
                d[key] = 1
    vocab = d.get("vocab_size")
    if "pad_token_id" in d and d["pad_token_id"] is None and isinstance(vocab, int):
        taken = {v for k, v in d.items() if k.endswith("_token_id") and isinstance(v, int)}
        d["pad_token_id"] = max(i for i in range(vocab) if i not in taken)
    kinds = d.get("layer_types")
    if d.get("rope_parameters") == {} and isinstance(kinds, list) and kinds \
            and all(isinstance(k, str) for k in kinds):
        d["rope_parameters"] = {kind: dict(DEFAULT_ROPE) for kind in dict.fromkeys(kinds)}
