"""The battery's tiny sizes and the config keys that name expert counts: one table that the
tiny-config rules (shrink.py) and the profile that gives unset sizes (unset_sizes.py) both read,
so that neither imports the other."""

from __future__ import annotations

HIDDEN = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 64
LAYERS = 2
VOCAB = 256
MAX_POSITIONS = 512
IMAGE_SIZE = 32
PATCH_SIZE = 4
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
QUERIES = 16

EXPERT_KEYS = {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"}
TOPK_KEYS = {"num_experts_per_tok", "moe_topk", "num_selected_experts", "top_k", "moe_k",
              "num_experts_per_token", "experts_per_token"}
