"""A decoder-only transformer (Llama's architecture) as one rank of a tensor-parallel group runs
it, in plain PyTorch, to be traced under FakeTensorMode at full size (trace.py).

The sharding is Megatron's, which NxD Inference and NxD Training use: attention heads and the
MLP's intermediate size split over the `tp` ranks (column-parallel in, row-parallel out, an
all-reduce after each); the embedding and the output head split over the vocabulary. Heads that
do not divide by `tp` are padded up (transformers-neuronx and NxD pad them), and KV heads fewer
than `tp` are replicated, one per rank. The configurations are the models' own Hugging Face
`config.json` figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .trace import collective, mark_resident


@dataclass(frozen=True)
class TransformerConfig:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    source: str

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def parameters(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads)
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (attn + mlp + 2 * self.hidden) + 2 * self.vocab * self.hidden


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


CONFIGS: dict[str, TransformerConfig] = {c.name: c for c in (
    TransformerConfig("llama-2-7b", 4096, 32, 32, 32, 11008, 32000,
                      _hf("meta-llama/Llama-2-7b-hf")),
    TransformerConfig("llama-2-13b", 5120, 40, 40, 40, 13824, 32000,
                      _hf("meta-llama/Llama-2-13b-hf")),
    TransformerConfig("llama-2-70b", 8192, 80, 64, 8, 28672, 32000,
                      _hf("meta-llama/Llama-2-70b-hf")),
    TransformerConfig("llama-3-8b", 4096, 32, 32, 8, 14336, 128256,
                      _hf("meta-llama/Meta-Llama-3-8B")),
    TransformerConfig("llama-3-70b", 8192, 80, 64, 8, 28672, 128256,
                      _hf("meta-llama/Meta-Llama-3-70B")),
    TransformerConfig("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256,
                      _hf("meta-llama/Llama-3.1-405B")),
    TransformerConfig("mistral-7b", 4096, 32, 32, 8, 14336, 32000,
                      _hf("mistralai/Mistral-7B-Instruct-v0.2")),
    TransformerConfig("codellama-13b", 5120, 40, 40, 40, 13824, 32016,
                      _hf("codellama/CodeLlama-13b-hf")),
)}


def config_named(name: str) -> TransformerConfig:
    if name not in CONFIGS:
        raise ValueError(f"unknown model {name!r}: known models are {', '.join(sorted(CONFIGS))}")
    return CONFIGS[name]


class _ReduceForward(torch.autograd.Function):
    """Megatron's g: all-reduce in forward, identity in backward."""

    @staticmethod
    def forward(ctx, x):
        return collective("all_reduce", x, "tp")

    @staticmethod
    def backward(ctx, grad):
        return grad


class _ReduceBackward(torch.autograd.Function):
    """Megatron's f: identity in forward, all-reduce of the gradient in backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return collective("all_reduce", grad, "tp")


def _gather(x: torch.Tensor, s: int) -> torch.Tensor:
    """Sequence parallel: all-gather the sequence shards of `x` into `s` positions (traced as
    the collective and an empty full-size tensor: no data is needed to price it)."""
    full = x.new_empty((x.shape[0], s, x.shape[2]))
    collective("all_gather", full, "tp")
    return full


def _scatter(x: torch.Tensor, s_local: int) -> torch.Tensor:
    """Sequence parallel: reduce-scatter `x` over the sequence, keeping this rank's shard."""
    collective("reduce_scatter", x, "tp")
    return x[:, :s_local]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + eps)).to(x.dtype) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class RankLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig, tp: int, dtype: torch.dtype):
        super().__init__()
        self.tp = tp
        self.heads = math.ceil(cfg.heads / tp)
        self.kv_heads = max(1, math.ceil(cfg.kv_heads / tp))
        self.head_dim = cfg.head_dim
        inter = math.ceil(cfg.intermediate / tp)
        kw = {"bias": False, "dtype": dtype}
        self.qkv = nn.Linear(cfg.hidden, (self.heads + 2 * self.kv_heads) * self.head_dim, **kw)
        self.o = nn.Linear(self.heads * self.head_dim, cfg.hidden, **kw)
        self.gate_up = nn.Linear(cfg.hidden, 2 * inter, **kw)
        self.down = nn.Linear(inter, cfg.hidden, **kw)
        self.norm1 = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype))
        self.norm2 = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype))

    def forward(self, x, cos, sin, cache=None, position=None, s=None):
        """`s`: the full sequence length when `x` holds a sequence-parallel shard of it (the
        residual stream, norms and adds split over the tp ranks; inference only)."""
        sp = s is not None
        b, s_local, _ = x.shape
        s = s or s_local
        h = _rms_norm(x, self.norm1)
        h = _gather(h, s) if sp else _ReduceBackward.apply(h)
        q, k, v = self.qkv(h).split([self.heads * self.head_dim, self.kv_heads * self.head_dim,
                                     self.kv_heads * self.head_dim], dim=-1)
        q = _rope(q.view(b, s, self.heads, self.head_dim).transpose(1, 2), cos, sin)
        k = _rope(k.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2), cos, sin)
        v = v.view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None:  # decode: write this step's K/V, attend over the whole cache
            k_cache, v_cache = cache
            k_cache.index_copy_(2, position, k)
            v_cache.index_copy_(2, position, v)
            k, v = k_cache, v_cache
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None,
                                              enable_gqa=self.heads != self.kv_heads)
        attn = attn.transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        out = self.o(attn)
        x = x + (_scatter(out, s_local) if sp else _ReduceForward.apply(out))
        h = _rms_norm(x, self.norm2)
        h = _gather(h, s) if sp else _ReduceBackward.apply(h)
        gate, up = self.gate_up(h).chunk(2, dim=-1)
        out = self.down(F.silu(gate) * up)
        return x + (_scatter(out, s_local) if sp else _ReduceForward.apply(out))


class RankModel(nn.Module):
    """One rank's share of the model: `layers` decoder layers (all of them, or a pipeline
    stage's), the vocabulary-parallel embedding and output head."""

    def __init__(self, cfg: TransformerConfig, tp: int, layers: int | None = None,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        self.cfg, self.tp = cfg, tp
        vocab = math.ceil(cfg.vocab / tp)
        self.embed = nn.Embedding(vocab, cfg.hidden, dtype=dtype)
        self.layers = nn.ModuleList(RankLayer(cfg, tp, dtype)
                                    for _ in range(cfg.layers if layers is None else layers))
        self.norm = nn.Parameter(torch.ones(cfg.hidden, dtype=dtype))
        self.head = nn.Linear(cfg.hidden, vocab, bias=False, dtype=dtype)

    def rotary(self, s: int, dtype):
        d = self.cfg.head_dim
        angles = torch.arange(s, dtype=torch.float32)[:, None] * torch.ones(d)[None, :]
        return angles.cos().to(dtype), angles.sin().to(dtype)

    def forward(self, tokens, caches=None, position=None, last_only=False, recompute=False,
                sequence_parallel=False):
        b, s = tokens.shape
        x = self.embed(tokens)  # vocabulary-parallel: each rank holds a slice of the table
        full = None
        if sequence_parallel and self.tp > 1:
            full = s
            x = _scatter(x, math.ceil(s / self.tp))
        else:
            x = collective("all_reduce", x, "tp")
        cos, sin = self.rotary(s, x.dtype)
        for i, layer in enumerate(self.layers):
            cache = None if caches is None else caches[i]
            if recompute:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, cache, position,
                                                      use_reentrant=False)
            else:
                x = layer(x, cos, sin, cache, position, full)
        if last_only:
            x = x[:, -1:]
        return self.head(_rms_norm(x, self.norm))


def rank_parameters(cfg: TransformerConfig, tp: int, layers: int | None = None) -> int:
    """The parameters one rank of RankModel holds (padding and replication included)."""
    heads, kv = math.ceil(cfg.heads / tp), max(1, math.ceil(cfg.kv_heads / tp))
    inter, vocab = math.ceil(cfg.intermediate / tp), math.ceil(cfg.vocab / tp)
    layer = (cfg.hidden * (heads + 2 * kv) * cfg.head_dim + heads * cfg.head_dim * cfg.hidden
             + 3 * cfg.hidden * inter + 2 * cfg.hidden)
    return (cfg.layers if layers is None else layers) * layer + 2 * vocab * cfg.hidden + cfg.hidden


def rank_cache_bytes(cfg: TransformerConfig, tp: int, batch: int, context: int,
                     itemsize: int = 2) -> int:
    """One rank's K and V caches for `batch` sequences of `context` positions."""
    kv = max(1, math.ceil(cfg.kv_heads / tp))
    return 2 * cfg.layers * batch * kv * context * cfg.head_dim * itemsize


def kv_caches(model: RankModel, batch: int, length: int) -> list[tuple[torch.Tensor, ...]]:
    """Each layer's K and V cache of `length` positions, resident in HBM."""
    caches = []
    for layer in model.layers:
        shape = (batch, layer.kv_heads, length, layer.head_dim)
        k = torch.empty(shape, dtype=layer.qkv.weight.dtype)
        v = torch.empty(shape, dtype=layer.qkv.weight.dtype)
        mark_resident(k, v)
        caches.append((k, v))
    return caches
