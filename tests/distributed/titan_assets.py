"""Offline assets for TorchTitan's Llama debug config, which reads `tests/assets/c4_test` (a text
dataset) and `tests/assets/tokenizer` relative to the working directory; the PyPI wheel ships
neither. We write both: text from the docstrings of Python's standard library (deterministic for
one Python version) and a byte-level BPE tokenizer trained on it with the debug model's vocabulary
size (2048).

With copies=N the dataset holds the documents N times in a row. TorchTitan gives each of N
data-parallel ranks one contiguous Nth of a map-style dataset, so then every rank reads the same
samples as a single-process run does: N-way FSDP and one process train on identical batches.

Run: `python tests/distributed/titan_assets.py DIR [COPIES]`, then start torchtitan from DIR."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys

VOCAB_SIZE = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
MODULES = ("collections", "functools", "itertools", "json", "os", "pathlib", "re", "statistics",
           "string", "textwrap", "unittest", "argparse", "logging", "email", "http",
           "urllib", "xml", "html", "csv", "datetime", "decimal", "fractions", "random")


def corpus() -> list[str]:
    """One document per documented function or class of some standard-library packages."""
    docs = []
    for name in MODULES:
        mods = [importlib.import_module(name)]
        path = getattr(mods[0], "__path__", None)
        if path:
            for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
                if info.name.startswith("_"):  # __main__ would run the package's CLI
                    continue
                try:
                    mods.append(importlib.import_module(f"{name}.{info.name}"))
                except Exception:  # platform-specific submodules
                    continue
        for mod in mods:
            for attr in sorted(vars(mod)):
                doc = getattr(getattr(mod, attr), "__doc__", None)
                if isinstance(doc, str) and len(doc) > 200:
                    docs.append(doc.strip())
    return sorted(set(docs))


def write_assets(root: str, copies: int = 1) -> None:
    """Writes the assets from a fresh interpreter. The corpus reads module namespaces, which
    other imports in the calling process change (a package gains each submodule someone imported
    as an attribute, with its docstring): a test session that had collected the sentence-
    transformers tests trained TorchTitan on other text (first loss 8.085 instead of 8.152)."""
    subprocess.run([sys.executable, os.path.abspath(__file__), root, str(copies)], check=True)


def write_assets_here(root: str, copies: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    data_dir = os.path.join(root, "tests", "assets", "c4_test")
    tok_dir = os.path.join(root, "tests", "assets", "tokenizer")
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(tok_dir, exist_ok=True)
    texts = corpus()
    with open(os.path.join(data_dir, "data.json"), "w") as f:
        for _ in range(copies):
            for text in texts:
                f.write(json.dumps({"text": text}) + "\n")

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tok.save(os.path.join(tok_dir, "tokenizer.json"))
    with open(os.path.join(tok_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True,
                   "add_eos_token": True}, f)


if __name__ == "__main__":
    write_assets_here(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
