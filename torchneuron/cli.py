"""The `torchneuron` command. Each tool package adds its own subcommand through
`add_subcommand(subparsers)`; this file only wires them together."""

from __future__ import annotations

import argparse
import importlib
import sys

# Tool packages that provide a subcommand, in the order `--help` lists them.
SUBCOMMANDS = ("torchneuron.compat.cli", "torchneuron.port.cli", "torchneuron.profiler.cli",
               "torchneuron.timemodel.cli", "torchneuron.ops.cli",
               "torchneuron.readiness.cli")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchneuron", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_subcommand(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
