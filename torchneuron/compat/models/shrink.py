"""Tiny configs: a model type's default config (full size, e.g. 32 layers of 4096) rewritten by
key-name rules to a few layers of small, mutually consistent sizes, so that hundreds of
architectures build and run in seconds each. The rules act on the config's dict form
(tiny_config.py rebuilds and validates it with the config class, exactly as from_pretrained
would); follow_widths.py and config_repairs.py finish the sizes these rules cannot see."""

from __future__ import annotations

import math
import re
from typing import Any

from . import hidden_factors
from .tiny_sizes import (EXPERT_KEYS, EXPERTS, EXPERTS_PER_TOKEN, HEAD_DIM, HEADS, HIDDEN,
                         IMAGE_SIZE, INTERMEDIATE, KV_HEADS, LAYERS, MAX_POSITIONS, PATCH_SIZE,
                         QUERIES, TOPK_KEYS, VOCAB)

_HIDDEN_KEYS = {
    "hidden_size", "d_model", "n_embd", "n_embed", "embed_dim", "dim", "d_embed", "model_dim",
    "word_embed_proj_dim", "embedding_size", "hidden_dim", "d_hidden", "emb_dim", "embedding_dim",
    "text_embed_dim", "vision_embed_dim", "encoder_hidden_size", "decoder_hidden_size",
    "projection_dim", "proj_dim", "output_hidden_size", "hidden_channels", "block_out_channels",
}
# The third profile ("every width") also shrinks widths that the first two keep because some
# architectures run with them as they are: projections into another tower's width, latent
# arrays, expert widths, and group counts that must divide a width that shrank.
_EXTRA_WIDTH_KEYS = {"out_hidden_size", "d_latents", "image_token_embed_dim", "text_hidden_size",
                     "expert_ffn_hidden_size", "classifier_proj_size", "quantization_dim",
                     "xvector_output_dim", "encoder_hidden_dim"}
# The first width of a convolutional tower whose stages multiply it (VQ-GAN, codec encoders).
_BASE_WIDTH_KEYS = {"base_channels", "num_filters", "n_filters"}
_GROUPS = re.compile(r"_groups$")
_SCALING = re.compile(r"(width|depth)_(coefficient|multiplier)$")
GROUPS = 8  # divides every shrunk width (multiples of 8)
_HEAD_KEYS = {
    "num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
    "decoder_attention_heads", "num_decoder_attention_heads", "encoder_num_attention_heads",
    "decoder_num_attention_heads",
}
_KV_HEAD_KEYS = {"num_key_value_heads", "n_kv_heads", "num_kv_heads", "multi_query_group_num"}
_INTERMEDIATE_KEYS = {
    "intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
    "ffn_hidden_size", "decoder_intermediate_size", "encoder_intermediate_size", "d_inner",
    "mlp_dim", "feed_forward_size", "intermediate_dim",
}
_SMALL_INTERMEDIATE_KEYS = {"moe_intermediate_size", "shared_expert_intermediate_size",
                            "expert_intermediate_size"}
_POSITION_KEYS = {"max_position_embeddings", "n_positions", "max_target_positions",
                  "max_source_positions", "n_ctx", "max_seq_len", "max_sequence_length"}
_DEPTH_KEYS = {"depth", "num_blocks", "n_layers", "n_layer"}
_LAYERS = re.compile(r"(^|_)layers$")
_HEAD_DIM = re.compile(r"head_dim$|^rotary_dim$")  # rotary dims are a part of a head
_LORA_RANK = re.compile(r"lora_rank$")
_VOCAB = re.compile(r"(^|_)vocab_size(_|$)|_vocab$")
# Randomness inside forward (dropout, masking, VITS-style noise) draws from per-device
# generators, whose streams diverge between a CPU run and a neuron run (as CPU and CUDA do).
# Named rates are zeroed; draws that remain are given from the CPU run (compat/random_draws.py).
# A prior probability (initializer_bias_prior_prob: detection heads' initial class bias is
# -log((1 - p) / p)) is no rate of randomness, and zero divides by zero.
_RANDOM_FLOAT = re.compile(
    r"dropout|drop_path|droppath|layerdrop|layer_drop|pdrop|drop_rate|drop_connect_rate|"
    r"(?<!prior)_prob$|noise_scale")


def _kept_layers(d: dict, layers_before: int | None) -> list[int]:
    """Which layers a shrunk model keeps: the first, and the first of another kind where a
    per-layer list (layer_types: attention/mamba, sliding/full) varies, so hybrids stay hybrid."""
    keep = list(range(LAYERS))
    if not layers_before or layers_before <= LAYERS:
        return keep
    # The attention kinds decide first (linear vs full attention needs a cache of each kind);
    # MLP kinds (dense/sparse) and others next.
    lists = sorted((v for v in d.values() if isinstance(v, list)),
                   key=lambda v: not any("attention" in str(x) for x in v))
    for value in lists:
        if len(value) == layers_before:
            other = next((i for i, v in enumerate(value) if v != value[0]), None)
            if other is not None:
                return [0, other]
    return keep


def _shrink_list(key: str, value: list, layers_before: int | None, keep: list[int]) -> list:
    if layers_before and len(value) == layers_before and len(value) > LAYERS:
        kept = [value[i] for i in keep]  # per-layer settings follow the kept layers
        if "heads" in key and all(isinstance(v, int) for v in kept):  # heads of each layer
            return [min(v, KV_HEADS if "key_value" in key or "kv" in key else HEADS) for v in kept]
        return kept
    if key == "image_size" and all(isinstance(v, int) for v in value):
        return [min(v, IMAGE_SIZE) for v in value]
    if not value or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    if key in ("depths", "num_layers", "layers", "block_repeats", "stage_depths"):
        return [1] * len(value)
    if "heads" in key:  # powers of two, which divide every shrunk width (Swin2SR's six heads)
        return [min(1 << (v.bit_length() - 1) if v > 0 else v, 1 << i) for i, v in enumerate(value)]
    if key in ("hidden_sizes", "embed_dims", "conv_dim", "channels", "dims", "block_out_channels",
               "embed_dim", "encoder_hidden_sizes", "neck_hidden_sizes"):
        return [_narrower(v) for v in value]
    if key == "mrope_section" or key == "mrope_sections":
        return scaled_sections(value, HEAD_DIM // 2)
    return value


def _narrower(width: int) -> int:
    """A stage width of a staged tower, a sixteenth of it: the same width always maps to the same
    one, so a stage's input channels still equal the previous stage's output channels."""
    return max(8, width // 16 // 8 * 8) if width > 128 else width


def scaled_sections(sections: list[int], total: int) -> list[int]:
    """Splits `total` in the proportions of `sections` (rotary sections must sum to it)."""
    whole = sum(sections)
    out = [max(1, s * total // whole) for s in sections]
    out[-1] += total - sum(out)
    return out


def _shrink_int(key: str, value: int) -> int:
    if key in _HIDDEN_KEYS:
        return min(value, HIDDEN)
    if key in _HEAD_KEYS:
        return min(value, HEADS)
    if key in _KV_HEAD_KEYS:
        return min(value, KV_HEADS)
    if key in _INTERMEDIATE_KEYS:
        return min(value, INTERMEDIATE)
    if key in _SMALL_INTERMEDIATE_KEYS:
        return min(value, INTERMEDIATE // 2)
    if key in EXPERT_KEYS:
        return min(value, EXPERTS)
    if key in TOPK_KEYS:
        return min(value, EXPERTS_PER_TOKEN)
    if key in ("n_group", "topk_group", "n_shared_experts", "num_shared_experts", "num_group",
               "num_expert_group"):
        return min(value, 1)
    if key in _POSITION_KEYS:
        return min(value, MAX_POSITIONS)
    if key == "num_feat_extract_layers":
        return value  # must equal len(conv_dim); the conv stack stays, only its width shrinks
    if key.endswith("_layer_period"):
        return min(value, LAYERS)  # every LAYERS-th layer is of that kind (Jamba's attention)
    if key in _DEPTH_KEYS or _LAYERS.search(key):
        return min(value, LAYERS)
    if _HEAD_DIM.search(key):
        return min(value, HEAD_DIM)
    if _LORA_RANK.search(key):
        return min(value, HEAD_DIM)
    if key == "vocab_size" or _VOCAB.search(key):
        return min(value, VOCAB)  # also per-layer and per-modality vocabularies
    if key == "image_size":
        return min(value, IMAGE_SIZE)
    if key == "patch_size":
        return min(value, PATCH_SIZE)
    if key == "num_queries":
        return min(value, QUERIES)  # object queries: fewer than the tiny image's tokens
    if key == "num_conv_pos_embeddings":
        return min(value, 16)
    return value


def _shrink_every_width(key: str, value: int) -> int:
    if key in _EXTRA_WIDTH_KEYS:
        return min(value, HIDDEN)
    if key in _BASE_WIDTH_KEYS:
        return max(8, value // 4)  # each stage multiplies it: a quarter shrinks every stage
    if key == "num_groups" or _GROUPS.search(key):
        return min(value, GROUPS)
    return value


def _layer_count(d: dict) -> int | None:
    if isinstance(d.get("depths"), list):
        return None  # a staged (vision) model: its lists are per stage, not per layer
    for key in ("num_hidden_layers", "n_layer", "num_layers", "decoder_layers", "n_layers"):
        if isinstance(d.get(key), int):
            return d[key]
    return None


def _per_layer(value: dict, keep: list[int]) -> dict | None:
    """A dict keyed by layer index ("05": {...}) follows the kept layers, renumbered; None when
    the dict is not keyed by layer indices."""
    if not value or not all(isinstance(k, str) and k.isdigit() for k in value):
        return None
    return {str(new): value[k] for new, old in enumerate(keep)
            for k in value if int(k) == old}


# Multi-head latent attention (DeepSeek-V2/V3 style) splits a query head into a part with and a
# part without rotary embedding; the config stores their sum, and head_dim is one of the parts.
_HEAD_PARTS = ("qk_head_dim", "qk_rope_head_dim", "v_head_dim")
_WIDTH_NAME = re.compile(r"_(dim|dims|size)$")


OTHER_WIDTH = re.compile(r"hidden_(size|dim)$|_dim$|^d_model$")
_STAGE_WIDTHS = re.compile(r"(dim|dims|size|sizes|channels)(_per_stage)?$")


def grows_from(value, first: int) -> bool:
    """A list of stage widths: starts at `first` and grows (Hiera's embed_dim_per_stage)."""
    return isinstance(value, list) and len(value) > 1 \
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value) \
        and value[0] == first and value[-1] > first and value == sorted(value)


def _derive_head_sizes(d: dict, out: dict) -> None:
    """Sizes the full-size defaults derive from others are derived again from the shrunk ones:
    qk_head_dim is the sum of its rotary and non-rotary parts; head_dim is the part it equals
    in the defaults, else hidden_size // num_attention_heads (also where the default leaves it
    None, which the config documents as that quotient); key/value heads equal to the query heads
    in the defaults (no grouped-query attention) stay equal; other widths (`*_dim`, `*_size`)
    no rule shrank that equal hidden_size in the defaults follow it (EnCodec's codebook_dim),
    and lists that sum to it are split in the same proportions."""
    if all(isinstance(out.get(k), int) for k in ("qk_nope_head_dim", "qk_rope_head_dim")) \
            and isinstance(out.get("qk_head_dim"), int):
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    hidden, heads = out.get("hidden_size"), out.get("num_attention_heads")
    if "head_dim" in out and (out["head_dim"] is None or isinstance(out["head_dim"], int)) \
            and isinstance(hidden, int) and isinstance(heads, int) and heads:
        part = next((k for k in _HEAD_PARTS if isinstance(d.get(k), int)
                     and d.get("head_dim") == d[k]), None)
        parts = ("qk_nope_head_dim", "qk_rope_head_dim")
        if part:
            out["head_dim"] = out[part]
        elif all(isinstance(d.get(k), int) for k in parts) \
                and d.get("head_dim") == sum(d[k] for k in parts):
            out["head_dim"] = sum(out[k] for k in parts)  # the sum, stored without qk_head_dim
        else:
            out["head_dim"] = max(1, hidden // heads)
    if isinstance(hidden, int) and isinstance(d.get("hidden_size"), int):
        for key, value in d.items():  # parts of the width (Reformer's axial embeddings)
            if isinstance(key, str) and isinstance(value, list) and len(value) > 1 \
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in value) \
                    and sum(value) == d["hidden_size"] and sum(out[key]) != hidden:
                out[key] = scaled_sections(value, hidden)
        for key, value in d.items():  # stage widths that start at hidden_size and grow from it
            if grows_from(value, d["hidden_size"]) and _STAGE_WIDTHS.search(key) \
                    and out.get(key) == value and hidden != d["hidden_size"]:
                out[key] = [v * hidden // d["hidden_size"] for v in value]
        for key, value in d.items():  # widths left at their default that equal hidden_size
            if isinstance(key, str) and _WIDTH_NAME.search(key) and value == d["hidden_size"] \
                    and isinstance(value, int) and not isinstance(value, bool) \
                    and out.get(key) == value and value != hidden:
                out[key] = hidden
    kv = next((k for k in _KV_HEAD_KEYS if k in d), None)
    if kv and isinstance(heads, int) and d[kv] in (None, d.get("num_attention_heads")):
        out[kv] = heads  # None is documented as "as many as num_attention_heads"
    for side in ("encoder_", "decoder_"):  # the same per side (Moonshine's encoder and decoder)
        kv, query = f"{side}num_key_value_heads", f"{side}num_attention_heads"
        if kv in d and isinstance(out.get(query), int) and d[kv] in (None, d.get(query)):
            out[kv] = out[query]
    topk = next((k for k in TOPK_KEYS if k in d and d[k] is None), None)
    if topk and any(isinstance(out.get(k), int) for k in EXPERT_KEYS):
        out[topk] = EXPERTS_PER_TOKEN  # left unset in defaults that checkpoints always set


def _follow_patch_grid(d: dict, out: dict) -> None:
    """A size no rule shrank that the defaults make the image's patches per side
    (image_size // patch_size: SAM's prompt encoder embeds its dense prompts on a 64 x 64 grid,
    1024 // 16) is the shrunk image's patches per side, the grid the vision tower makes."""
    image, patch = d.get("image_size"), d.get("patch_size")
    small_image, small_patch = out.get("image_size"), out.get("patch_size")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
               for v in (image, patch, small_image, small_patch)) or image // patch == small_image // small_patch:
        return
    for key, value in d.items():
        if isinstance(key, str) and key not in _IMAGE_KEYS and key.endswith("_size") \
                and value == image // patch and not isinstance(value, bool) and out.get(key) == value:
            out[key] = small_image // small_patch


def _follow_repeated_width(d: dict, out: dict) -> None:
    """A list that repeats one width ([256, 256, 256]: a width per feature level) follows the
    widths of that default value, where every such width shrank to the same one (D-FINE's
    decoder_in_channels are the encoder's width, which equals d_model)."""
    for key, value in d.items():
        if not (isinstance(key, str) and isinstance(value, list) and len(value) > 1
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                and len(set(value)) == 1):
            continue
        shrunk = {out[k] for k, v in d.items() if isinstance(k, str) and k != key and v == value[0]
                  and not isinstance(v, bool) and OTHER_WIDTH.search(k) and isinstance(out.get(k), int)}
        if len(shrunk) == 1:
            out[key] = [shrunk.pop()] * len(value)


def _follow_width_coefficient(d: dict, out: dict) -> None:
    """Compound scaling (EfficientNet) makes the top width the base network's times the width
    coefficient (hidden_dim = 1280 x 2.0): where the coefficient shrank to the base network's,
    that width follows it instead of the width rule, so the top convolution and its norm agree."""
    old, new = d.get("width_coefficient"), out.get("width_coefficient")
    if not (isinstance(old, float) and isinstance(new, float) and old != new and old > 0):
        return
    width = d.get("hidden_dim")
    if isinstance(width, int) and not isinstance(width, bool) and (width / old).is_integer():
        out["hidden_dim"] = int(width / old * new)


def _derive_per_layer(d: dict, out: dict, keep: list[int]) -> None:
    """A layer's own settings (per_layer_config) override the model's: its derived sizes are
    derived from the merged view, and where they differ from the model's the layer gets its own
    (a layer whose default head_dim is the sum of its own head parts keeps that sum)."""
    for key, value in d.items():
        full = _per_layer(value, keep) if isinstance(value, dict) else None
        if not full or not isinstance(out.get(key), dict):
            continue
        for index, layer in out[key].items():
            if not isinstance(layer, dict) or not isinstance(full.get(index), dict):
                continue
            merged = {**out, **layer}
            _derive_head_sizes({**d, **full[index]}, merged)
            for name in ("head_dim", "qk_head_dim", *_KV_HEAD_KEYS):
                if name in merged and merged[name] != out.get(name, layer.get(name)):
                    layer[name] = merged[name]


# State-space (Mamba-2) mixers: heads x head width equals expand x hidden_size.
_SSM_HEADS = (("mamba_n_heads", "mamba_d_head", "mamba_expand"), ("num_heads", "head_dim", "expand"),
              ("n_mamba_heads", "mamba_headdim", "mamba_expand"))
_SSM_GROUPS = ("n_groups", "mamba_n_groups", "mamba_ngroups")


def _derive_ssm_heads(d: dict, out: dict) -> None:
    """Where the defaults size a Mamba-2 mixer as heads x head width = expand x hidden_size,
    the shrunk mixer keeps that identity with at most HEADS heads, and its groups divide them."""
    hidden = out.get("hidden_size")
    for heads, width, expand in _SSM_HEADS:
        values = [d.get(k) for k in (heads, width, expand, "hidden_size")]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values) \
                or values[0] * values[1] != values[2] * values[3] or not isinstance(hidden, int):
            continue
        out[heads] = min(out[heads], HEADS)
        out[width] = max(1, out[expand] * hidden // out[heads])
        for groups in _SSM_GROUPS:
            if isinstance(out.get(groups), int) and out[heads] % out[groups]:
                out[groups] = math.gcd(out[groups], out[heads])


def _keep_head_dim(d: dict, out: dict) -> None:
    """The second shrink profile: the full-size head_dim stays (rotary sections, per-head norms
    and fused kernels are sized from it), with two heads of it, instead of shrinking each head."""
    hidden, heads = d.get("hidden_size"), d.get("num_attention_heads")
    if not (isinstance(hidden, int) and isinstance(heads, int) and heads):
        return
    head_dim = d["head_dim"] if isinstance(d.get("head_dim"), int) else hidden // heads
    out["num_attention_heads"] = 2
    out["hidden_size"] = 2 * head_dim
    if isinstance(out.get("head_dim"), int):
        out["head_dim"] = head_dim
    if isinstance(out.get("num_key_value_heads"), int):
        out["num_key_value_heads"] = 1 if d["num_key_value_heads"] < heads else 2
    if isinstance(out.get("intermediate_size"), int):
        out["intermediate_size"] = 2 * head_dim


PROFILES = ("small heads", "full head_dim", "every width", "every width, full head_dim",
            "every width, full image", "unset sizes set", "derived sizes derived again",
            "hidden size keeps its factor of three")
# "every width, full image" keeps the default image (size, patch, windows): relative position
# tables, window partitions and feature-map strides of many vision towers are sized from it.
# "unset sizes set" is the first one plus the sizes the defaults leave unset (unset_sizes.py);
# the next leaves sizes the config derives unset again (derived_again.py); the last one gives
# the hidden size the factor of three its default has (hidden_factors.py).
_IMAGE_KEYS = {"image_size", "patch_size", "window_size", "img_size", "input_size"}


def shrink_dict(d: dict[str, Any], profile: str = PROFILES[0]) -> dict[str, Any]:
    """The tiny version of one config dict; nested dicts (sub-configs) are shrunk the same way.
    `profile` is one of PROFILES (check.py tries them in order until the CPU runs the model)."""
    layers_before = _layer_count(d)
    keep = _kept_layers(d, layers_before)
    out: dict[str, Any] = {}
    for key, value in d.items():
        if not isinstance(key, str):
            out[key] = value  # id2label and friends: int keys, nothing to shrink
        elif profile.endswith("full image") and key in _IMAGE_KEYS:
            out[key] = value
        elif isinstance(value, dict) and layers_before and _per_layer(value, keep) is not None:
            out[key] = {k: shrink_dict(v, profile) if isinstance(v, dict) else v
                        for k, v in _per_layer(value, keep).items()}
        elif isinstance(value, dict):
            out[key] = shrink_dict(value, profile)
        elif value is None and key == "vocab_size":
            out[key] = VOCAB  # left unset by defaults whose checkpoints always set it (ESM)
        elif value is None and _PLACEHOLDER_ID.search(key):
            out[key] = PLACEHOLDER_ID  # unset by defaults, set by checkpoints (BLIP-2's images)
        elif isinstance(value, bool) or value is None:
            out[key] = value
        elif isinstance(value, int):
            out[key] = _shrink_int(key, value)
            if profile.startswith("every width"):
                out[key] = _shrink_every_width(key, out[key])
        elif isinstance(value, float) and _RANDOM_FLOAT.search(key):
            out[key] = 0.0  # no randomness in forward: CPU and neuron RNG streams differ
        elif isinstance(value, float) and profile.startswith("every width") and _SCALING.search(key):
            out[key] = min(value, 1.0)  # compound scaling (EfficientNet): the base network
        elif isinstance(value, list):
            out[key] = _shrink_list(key, value, layers_before, keep)
            if profile.startswith("every width") and key.endswith("_channels") \
                    and all(isinstance(v, int) and not isinstance(v, bool) for v in out[key]):
                out[key] = [_narrower(v) for v in out[key]]  # per-stage widths (HGNetV2)
        else:
            out[key] = value
    if isinstance(out.get("depths"), list):  # stage counts, not depth: stay as the list says
        if isinstance(out.get("num_layers"), int):
            out["num_layers"] = len(out["depths"])
        if d.get("num_hidden_layers") == len(d["depths"]):
            out["num_hidden_layers"] = len(out["depths"])
    if not isinstance(out.get("depths"), list):
        # Backbone outputs name layers that shrinking removed; the config derives them again.
        # A staged backbone keeps its stages (depths keeps its length), and so its outputs:
        # necks and pixel decoders read every level it names (Mask2Former's four).
        for key in ("out_features", "out_indices", "stage_names"):
            out.pop(key, None)
    if profile == hidden_factors.PROFILE:
        hidden_factors.keep_factor_of_three(d, out, HIDDEN)
    _derive_head_sizes(d, out)
    _follow_patch_grid(d, out)
    _follow_repeated_width(d, out)
    _follow_width_coefficient(d, out)
    _derive_ssm_heads(d, out)
    if layers_before:
        _derive_per_layer(d, out, keep)
    if profile.endswith("full head_dim"):
        _keep_head_dim(d, out)
    for key in out:  # an offset inside the shrunk period: the kind still occurs
        if isinstance(key, str) and key.endswith("_layer_offset") and isinstance(out[key], int) \
                and isinstance(out.get(key.replace("_offset", "_period")), int):
            out[key] %= out[key.replace("_offset", "_period")]
    if layers_before:
        _keep_an_attention_layer(out, layers_before)
    _sum_layer_parts(d, out)
    _keep_layer_multiple(d, out)
    _keep_shared_layers_last(d, out)
    _remap_token_ids(out)
    return out


_LAYER_PART = re.compile(r"^(n|num)_\w+_layers$")


def _sum_layer_parts(d: dict, out: dict) -> None:
    """Layer counts the defaults split into parts (Dory's n_input_layers + n_recurrent_layers +
    n_output_layers = num_hidden_layers) shrink part by part; the total stays their sum, and
    per-layer lists keep that many of their first layers."""
    total = d.get("num_hidden_layers")
    parts = [k for k, v in d.items() if isinstance(k, str) and _LAYER_PART.match(k)
             and k != "num_hidden_layers" and isinstance(v, int) and not isinstance(v, bool)]
    if isinstance(total, int) and len(parts) > 1 and sum(d[k] for k in parts) == total:
        out["num_hidden_layers"] = sum(out[k] for k in parts)
        for key, value in d.items():  # per-layer lists: the first layers, as many as there are
            if isinstance(value, list) and len(value) == total:
                out[key] = value[:out["num_hidden_layers"]]


_SHARED_LAYERS = re.compile(r"^num_\w*shared_layers$")


def _keep_shared_layers_last(d: dict, out: dict) -> None:
    """The last layers that reuse an earlier layer's cache (Gemma 3n's num_kv_shared_layers: 15
    of 35) need a layer of each kind before them that makes one; shrunk like any layer count,
    they would be every layer. The shrunk layers stay the ones that make caches, and as many
    shared layers follow (at most one per kept layer), repeating the last kept layers' kinds and
    settings in every per-layer list."""
    total = d.get("num_hidden_layers")
    layers = out.get("num_hidden_layers")
    for key, value in d.items():
        if not (isinstance(key, str) and _SHARED_LAYERS.match(key) and isinstance(value, int)
                and not isinstance(value, bool) and isinstance(total, int) and 0 < value < total
                and isinstance(layers, int) and isinstance(out.get(key), int)
                and out[key] >= layers):
            continue
        shared = min(out[key], layers)
        for name, full in d.items():  # per-layer lists: the shared layers repeat the last kept
            if isinstance(full, list) and len(full) == total and isinstance(out.get(name), list) \
                    and len(out[name]) == layers:
                out[name] = out[name] + out[name][layers - shared:]
        out["num_hidden_layers"] = layers + shared
        out[key] = shared


# The layers one stack builds, which the model runs several times over: the model's layer
# count (its cache slots) is the defaults' multiple of it (HRM-Text: 16 per stack, 128 in all).
_LAYERS_PER_STACK = re.compile(r"^num_layers_per_\w+$")


def _keep_layer_multiple(d: dict, out: dict) -> None:
    """A stack's layer count shrinks like any layer count, and num_hidden_layers stays the
    same multiple of it as in the defaults (a config that derives the total in __post_init__
    reads the stored one back as given)."""
    total = d.get("num_hidden_layers")
    for key, value in d.items():
        if isinstance(key, str) and _LAYERS_PER_STACK.match(key) and isinstance(value, int) \
                and not isinstance(value, bool) and isinstance(total, int) and 0 < value < total \
                and total % value == 0:
            out[key] = min(value, LAYERS)
            out["num_hidden_layers"] = out[key] * (total // value)


_KINDS = re.compile(r"(^|_)(layer|block)_types$")
_ATTENTION_INDICES = re.compile(r"(^|_)(attn|attention)_layer_indices$")


# A modality's placeholder token id (image_token_index, video_token_id): the processor writes it
# where the model puts the modality's features. Unset ones get an id inside the tiny vocabulary
# that no other token uses (the top ids hold the remapped special tokens).
_PLACEHOLDER_ID = re.compile(r"^(image|video|audio)_token_(id|index)$")
PLACEHOLDER_ID = VOCAB // 2


def _keep_an_attention_layer(out: dict, layers_before: int) -> None:
    """A tiny hybrid keeps a layer with attention (a cache of only linear/recurrent layers has
    no sequence length to give the mask): a repeating pattern of layer kinds shorter than the
    layers (RecurrentGemma's block_types) keeps one layer of each kind in the kept layers;
    attention layer indices left unset (Bamba: all Mamba) name the last kept layer; per-layer
    kinds with linear attention only (GraniteMoeHybrid's defaults) end in a full attention
    layer, the kind the same list names beside linear attention in other hybrids."""
    for key, value in out.items():
        if not isinstance(key, str):
            continue
        if _ATTENTION_INDICES.search(key) and value is None:
            out[key] = [LAYERS - 1]
        elif _KINDS.search(key) and isinstance(value, list) and value \
                and all(isinstance(v, str) for v in value):
            kinds = list(dict.fromkeys(value))
            if len(value) < layers_before and len(value) > LAYERS and len(kinds) <= LAYERS:
                out[key] = kinds  # the pattern repeats over the layers: each kind occurs
            elif kinds == ["linear_attention"]:
                out[key] = value[:-1] + ["full_attention"]


def _remap_token_ids(d: dict[str, Any]) -> None:
    """Special token ids past the shrunk vocabulary move to its top, distinct ids staying
    distinct, so embeddings never index out of range."""
    vocab = d.get("vocab_size")
    if not isinstance(vocab, int):
        text = d.get("text_config")
        vocab = text.get("vocab_size") if isinstance(text, dict) else None
    if not isinstance(vocab, int):
        return
    moved: dict[int, int] = {}

    def remap(i):
        if isinstance(i, int) and not isinstance(i, bool) and i >= vocab:
            if i not in moved:
                moved[i] = vocab - 1 - len(moved)
            return moved[i]
        return i

    for key in sorted(d):
        if key.endswith(("_token_id", "_token_index", "_token_ids")) or key == "decoder_start_token_id":
            value = d[key]
            d[key] = [remap(v) for v in value] if isinstance(value, list) else remap(value)


def special_token_ids(config) -> set[int]:
    """Every token id a config (or its sub-configs) names: inputs avoid them, so that no
    image/audio placeholder token asks for inputs the battery does not give."""
    ids: set[int] = set()

    def visit(d: dict):
        for key, value in d.items():
            if isinstance(value, dict):
                visit(value)
            elif isinstance(key, str) and (key.endswith("_id") or "token" in key):
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, int) and not isinstance(v, bool):
                        ids.add(v)

    visit(config.to_dict())
    return ids
