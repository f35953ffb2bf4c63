"""`torchneuron op-support [--check]`: writes docs/op-support.md (op_support_page.py), or with
--check exits 1 when the page on disk differs from what the code gives."""

from __future__ import annotations

import argparse
import sys

HELP = "write docs/op-support.md: every ATen op as native, host fallback or unsupported"


def add_subcommand(subparsers) -> None:
    parser = subparsers.add_parser("op-support", help=HELP, description=HELP)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when docs/op-support.md is stale")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from . import op_support_page as page

    if args.check:
        problem = page.differs()
        if problem:
            print(problem, file=sys.stderr)
            return 1
        print(f"{page.PAGE} is up to date")
        return 0
    print(f"wrote {page.write()}")
    return 0
