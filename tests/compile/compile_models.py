"""Small models the compile tests and benchmarks/compile.py share: an MLP, a CNN and a
transformer block whose attention is scaled_dot_product_attention."""

import torch
from torch import nn


class MLP(nn.Sequential):
    def __init__(self, width=64):
        super().__init__(nn.Linear(32, width), nn.GELU(), nn.Linear(width, width), nn.ReLU(),
                         nn.LayerNorm(width), nn.Linear(width, 8))


class CNN(nn.Sequential):
    def __init__(self):
        super().__init__(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.SiLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


class TransformerBlock(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4)
        attn = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


def mlp_input(batch=16):
    return torch.randn(batch, 32)


def cnn_input(batch=4):
    return torch.randn(batch, 3, 16, 16)


def transformer_input(batch=2, seq=16):
    return torch.randn(batch, seq, 64)
