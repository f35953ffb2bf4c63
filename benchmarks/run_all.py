"""Runs every benchmark in benchmarks/ and writes docs/performance.md: the machine it ran on,
then each benchmark's description (its docstring) and latest tables. `make bench-all`.

Each run is a fresh process, started as a user would start it (with the interpreter of its own
environment where a benchmark needs one, such as vLLM's), with `--markdown` added so that it
prints its settings and tables in Markdown; what it measures is what it measures alone. A
benchmark added to benchmarks/ but not to RUNS is named on the page as not run (and
tests/test_docs.py fails until it is listed and run); so is a run whose optional environment
this machine lacks.

Each benchmark runs with its own default round count; the whole run takes about a quarter of an
hour on a quiet 2-core machine (most of it compiling, and the collectives' largest buffers). The
file is written only if every run succeeds, so a failed run leaves the previous figures as they
were. `--only SCRIPT[,SCRIPT]` reruns only those benchmarks and replaces their sections in the
existing page, which then names them with the commit and date they ran at (for a benchmark whose
figures do not depend on this machine, such as time_model.py's predictions).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.metadata
import os
import pathlib
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
OUT = ROOT / "docs" / "performance.md"


@dataclass(frozen=True)
class Run:
    script: str  # a file in benchmarks/
    variant: str  # the subheading of this run's tables
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    python: str = ""  # an interpreter of another environment, relative to the repository root

    def interpreter(self) -> str:
        return str(ROOT / self.python) if self.python else sys.executable


# Benchmarks compare neuron and CPU at equal intra-op thread counts; 1 thread is the steadier
# measure on a shared machine, 2 the machine's width.
RUNS = (
    Run("eager_overhead.py", "1 thread", ("--threads", "1")),
    Run("eager_overhead.py", "2 threads", ("--threads", "2")),
    Run("adaptive_eager.py", "1 thread", ("--threads", "1")),
    Run("adaptive_eager.py", "the decoder block's profile, 1 thread",
        ("--threads", "1", "--profile")),
    Run("accounting.py", "the readiness accounting off and on, 1 thread", ("--threads", "1")),
    Run("accounting_off.py", "the accounting's check compiled in and out, 1 thread",
        ("--threads", "1")),
    Run("device_graphs.py", "1 thread", ("--threads", "1")),
    Run("compile.py", "1 thread", ("--threads", "1")),
    Run("compile.py", "2 threads", ("--threads", "2")),
    Run("compile.py", "2 threads, the CPU's matmul kernels (NEURON_COMPILE_GEMM=aten)",
        ("--threads", "2"), {"NEURON_COMPILE_GEMM": "aten"}),
    Run("collectives.py", "2 processes, shape check on (the default)"),
    Run("flight_recorder_cost.py", "2 processes, 5 runs per setting"),
    Run("nki_simulator.py", "NKI kernels on the software NeuronCore"),
    Run("kernels.py", "1 thread", ("--threads", "1")),
    Run("time_model.py", "published Trainium figures against the time model"),
    Run("serving.py", "3 rounds, in .venv-serve (make serve-demo creates it)", ("--rounds", "3"),
        python=".venv-serve/bin/python"),
)

# The modules in benchmarks/ that are helpers, not benchmarks.
HELPERS = {"timing.py", "run_all.py",
           "serving_decode_profile.py"}  # serving.py --decode-profile


def benchmark_scripts() -> list[str]:
    return sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name not in HELPERS)


def docstring(script: str) -> str:
    return ast.get_docstring(ast.parse((BENCHMARKS / script).read_text())) or ""


def machine() -> dict[str, str]:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor() or "unknown")
    mem_kib = next(int(line.split()[1]) for line in open("/proc/meminfo")
                   if line.startswith("MemTotal"))
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip() or "unknown"
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "memory": f"{mem_kib / (1 << 20):.1f} GiB",
        "OS": f"{platform.system()} {platform.release()}",
        "Python": platform.python_version(),
        "torch": importlib.metadata.version("torch"),
        "torchneuron commit": commit,
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "load average before the runs": f"{os.getloadavg()[0]:.2f}",
    }


def run(r: Run) -> tuple[str, float]:
    """The run's Markdown output and its duration in seconds; raises if it fails."""
    command = [r.interpreter(), str(BENCHMARKS / r.script), "--markdown", *r.args]
    print(f"== {r.script} ({r.variant})", flush=True)
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, **r.env},
                          stdout=subprocess.PIPE, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{r.script} {' '.join(r.args)} failed (exit {done.returncode}); "
                         f"{OUT.relative_to(ROOT)} left as it was")
    print(done.stdout, flush=True)
    return done.stdout.strip(), seconds


def command_line(r: Run) -> str:
    env = "".join(f"{k}={v} " for k, v in r.env.items())
    python = r.python or ".venv/bin/python"
    return f"{env}{python} benchmarks/{r.script} {' '.join(r.args)}".rstrip()


def not_in_runs() -> list[str]:
    return sorted(set(benchmark_scripts()) - {r.script for r in RUNS})


def without_environment() -> list[Run]:
    """Runs whose environment (an optional one, such as vLLM's) this machine does not have."""
    return [r for r in RUNS if r.python and not (ROOT / r.python).exists()]


def not_run_line(r: Run) -> str:
    """What the page says instead of a run's tables when its environment is missing."""
    return f"`benchmarks/{r.script}`: not run, this machine has no `{r.python}`"


def render(host: dict[str, str], outputs: list[tuple[Run, str, float]], total: float,
           skipped: list[Run] = ()) -> str:
    lines = ["# Performance", "",
             "Written by `make bench-all` (`benchmarks/run_all.py`), which runs every benchmark "
             "in `benchmarks/`; do not edit by hand. Each benchmark compares neuron with native "
             "CPU PyTorch (gloo on CPU tensors for collectives) measured in the same run, on the "
             "same machine; how it measures is its description below (the script's docstring). "
             "Figures move with the machine's load: compare runs made on a quiet machine "
             "(the load average before and after is in the table).", "",
             "| machine | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in host.items()]
    lines += [f"| load average after the runs | {os.getloadavg()[0]:.2f} |",
              f"| time for all runs | {total / 60:.1f} min |", ""]
    if not_in_runs():  # tests/test_docs.py fails until they are listed in RUNS and run
        lines += ["Not run (not listed in `benchmarks/run_all.py`): "
                  + ", ".join(f"`benchmarks/{s}`" for s in not_in_runs()), ""]
    lines += [line for r in skipped for line in (not_run_line(r), "")]
    for script in dict.fromkeys(r.script for r, _, _ in outputs):
        lines += section(script, outputs)
    return "\n".join(lines).rstrip() + "\n"


def section(script: str, outputs: list[tuple[Run, str, float]]) -> list[str]:
    """A benchmark's part of the page: its description, then each of its runs' tables."""
    lines = [f"## benchmarks/{script}", "", docstring(script), ""]
    for r, text, seconds in outputs:
        if r.script == script:
            lines += [f"### {r.variant}", "", f"`{command_line(r)}` ({seconds:.0f} s)", "",
                      text, ""]
    return lines


RERUN_NOTE = "Rerun alone since (`benchmarks/run_all.py --only`): "


def splice(page: str, host: dict[str, str], outputs: list[tuple[Run, str, float]]) -> str:
    """`page` with the sections of the benchmarks in `outputs` replaced (or added, in RUNS
    order) and a note naming them with the commit and date they ran at; the other sections and
    the machine table of the full run stay as they were."""
    head, *parts = page.split("\n## benchmarks/")
    sections = {part.split("\n", 1)[0]: "## benchmarks/" + part.rstrip() + "\n\n"
                for part in parts}
    rerun = list(dict.fromkeys(r.script for r, _, _ in outputs))
    for script in rerun:
        sections[script] = "\n".join(section(script, outputs)).rstrip() + "\n\n"
    notes = [line for line in head.rstrip().split("\n") if line.startswith(RERUN_NOTE)]
    earlier = notes[0][len(RERUN_NOTE):].split("; ") if notes else []
    kept = [n for n in earlier if n.split("`")[1] not in {f"benchmarks/{s}" for s in rerun}]
    ran = [f"`benchmarks/{s}` at {host['torchneuron commit']}, {host['date']}" for s in rerun]
    head_lines = [line for line in head.rstrip().split("\n") if not line.startswith(RERUN_NOTE)]
    head = "\n".join(head_lines + ["", RERUN_NOTE + "; ".join(kept + ran)]) + "\n\n"
    order = [r.script for r in RUNS] + [s for s in sections if s not in {r.script for r in RUNS}]
    body = "".join(sections[s] for s in dict.fromkeys(order) if s in sections)
    return (head + body).rstrip() + "\n"


def dirty_refusal(commit: str, out: pathlib.Path) -> str | None:
    """Why the published page may not be written now, or None: it names the commit it measured,
    so it is written from a clean one only (another --out, a scratch page, may be dirty)."""
    if out.resolve() == OUT.resolve() and commit.endswith("-dirty"):
        return (f"{OUT.relative_to(ROOT)} is written from a clean commit only ({commit}): commit "
                f"or stash the changes first, or write elsewhere with --out")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--only", help="comma-separated scripts of benchmarks/: rerun only "
                        "them and replace their sections in the existing page (for a benchmark "
                        "whose figures do not depend on this machine, such as time_model.py)")
    args = parser.parse_args()
    host = machine()
    refusal = dirty_refusal(host["torchneuron commit"], args.out)
    if refusal:
        raise SystemExit(refusal)
    if args.only:
        scripts = args.only.split(",")
        unknown = sorted(set(scripts) - {r.script for r in RUNS})
        if unknown:
            raise SystemExit(f"not in run_all.RUNS: {', '.join(unknown)}")
        if not args.out.exists():
            raise SystemExit(f"{args.out} does not exist: --only replaces sections of a page")
        outputs = [(r, *run(r)) for r in RUNS if r.script in scripts and r not in
                   without_environment()]
        args.out.write_text(splice(args.out.read_text(), host, outputs))
        print(f"wrote {args.out}")
        return
    if not_in_runs():
        print(f"warning: not in run_all.RUNS, so not run: {', '.join(not_in_runs())}",
              file=sys.stderr)
    skipped = without_environment()
    for r in skipped:
        print(f"warning: {not_run_line(r)}", file=sys.stderr)
    start = time.monotonic()
    outputs = [(r, *run(r)) for r in RUNS if r not in skipped]
    args.out.write_text(render(host, outputs, time.monotonic() - start, skipped))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
