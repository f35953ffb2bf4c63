"""`torchneuron port check|fix|codes`: the command line over engine and report."""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import sys

from . import engine, report, sources

HELP = "find (check) and rewrite (fix) code that ties a program to CUDA"


def add_subcommand(subparsers) -> None:
    parser = subparsers.add_parser("port", help=HELP, description=HELP)
    _configure(parser)


def _configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="port_command", required=True, metavar="{check,fix,codes}")
    check = sub.add_parser("check", help="list CUDA-isms; exit 1 if any",
                           description="List every CUDA-ism as `file:line:col CODE message`; "
                                       "exit 1 if any is found, 2 if a file could not be read.")
    fix = sub.add_parser("fix", help="rewrite CUDA-isms to device-agnostic PyTorch",
                         description="Rewrite what has an exact device-agnostic form, in place; "
                                     "list what is left. Exit 1 if anything is left.")
    for p in (check, fix):
        p.add_argument("paths", nargs="+", metavar="PATH",
                       help="Python files, notebooks, or directories (searched recursively)")
        p.add_argument("--format", choices=("text", "json"), default="text")
        p.add_argument("--select", default="", metavar="CODES",
                       help="only these codes or prefixes, comma-separated (TNP1,TNP201)")
        p.add_argument("--ignore", default="", metavar="CODES",
                       help="skip these codes or prefixes, comma-separated")
        p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                       help="skip files and directories matching GLOB (repeatable)")
        p.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                       help="files checked in parallel (default 1)")
    fix.add_argument("--diff", action="store_true", help="print the patch; write nothing")
    check.set_defaults(run=run_check)
    fix.set_defaults(run=run_fix)
    codes = sub.add_parser("codes", help="print the table of codes (Markdown)")
    codes.set_defaults(run=run_codes)


class CodeFilter:
    """--select / --ignore, as a picklable predicate on codes (for --jobs)."""

    def __init__(self, select: str, ignore: str):
        self.select = tuple(c.strip().upper() for c in select.split(",") if c.strip())
        self.ignore = tuple(c.strip().upper() for c in ignore.split(",") if c.strip())

    def __call__(self, code: str) -> bool:
        return ((not self.select or code.startswith(self.select))
                and not (self.ignore and code.startswith(self.ignore)))


def _run(args, fixing: bool) -> int:
    enabled = CodeFilter(args.select, args.ignore)
    diff = fixing and args.diff
    work = functools.partial(engine.process, fix=fixing, write=fixing and not diff,
                             enabled=enabled)
    paths = sources.discover(args.paths, args.exclude)
    if args.jobs > 1 and len(paths) > 1:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(work, paths, chunksize=4))
    else:
        results = [work(p) for p in paths]
    if args.format == "json":
        report.as_json(results, sys.stdout, fixing, diff)
    else:
        report.text(results, sys.stdout, sys.stderr, fixing, diff)
    if any(r.findings for r in results):
        return 1
    return 2 if any(r.errors for r in results) else 0


def run_check(args) -> int:
    return _run(args, fixing=False)


def run_fix(args) -> int:
    return _run(args, fixing=True)


def run_codes(args) -> int:
    sys.stdout.write(report.codes_markdown())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchneuron.port", description=HELP)
    _configure(parser)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)
