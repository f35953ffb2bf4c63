"""`torchneuron compat ops|models|diffusers|peft|sentence-transformers|vision|timm|all`: the batteries'
command line. Each battery module provides
`add_arguments(parser)` and `run(args) -> exit code` in its command.py."""

from __future__ import annotations

import argparse
import importlib

BATTERIES = {
    "ops": ("torchneuron.compat.ops.command",
            "every OpInfo in PyTorch's op database, neuron vs CPU"),
    "models": ("torchneuron.compat.models.command", "Hugging Face architectures, neuron vs CPU"),
    "diffusers": ("torchneuron.compat.diffusion.command",
                  "diffusers model classes and pipelines, neuron vs CPU"),
    "peft": ("torchneuron.compat.adapters.command",
             "PEFT methods on a decoder, an encoder and an encoder-decoder, neuron vs CPU"),
    "sentence-transformers": ("torchneuron.compat.sentences.command",
                              "sentence-transformers encode and contrastive fit, neuron vs CPU"),
    # torchvision and timm install beside torch 2.14.1 only (.venv-214, `make setup-214`).
    "vision": ("torchneuron.compat.vision.command",
               "torchvision's model builders, ops and transforms v2, neuron vs CPU"),
    "timm": ("torchneuron.compat.vision.timm_command",
             "timm's model families, forward and backward, neuron vs CPU"),
}


def _lazy_run(module: str):
    def run(args: argparse.Namespace) -> int:
        return importlib.import_module(module).run(args)

    return run


def add_subcommand(subparsers) -> None:
    compat = subparsers.add_parser("compat", help="run a compatibility battery")
    batteries = compat.add_subparsers(dest="battery", required=True)
    for name, (module, help_text) in BATTERIES.items():
        p = batteries.add_parser(name, help=help_text)
        p.add_argument("--out", default="reports", help="folder for the JSON/Markdown report")
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(run=_lazy_run(module))
    every = batteries.add_parser("all", help="every battery into a dated folder, compared with "
                                             "the previous run (exit 1 on a regression)")
    importlib.import_module("torchneuron.compat.nightly").add_arguments(every)
    every.set_defaults(run=_lazy_run("torchneuron.compat.nightly"))
