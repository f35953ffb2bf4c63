"""The documents stay in order: the README is a short entry point that starts with the commands
CI and the Makefile use and lists every environment variable torchneuron reads; each topic lives
in one file under docs/, so no heading or paragraph stands in two documents; docs/performance.md
covers every benchmark."""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIG = ROOT / "torchneuron" / "runtime" / "config.py"
README_MAX_LINES = 200
PASTED_PARAGRAPH_LINES = 3  # a shared paragraph this long is a paste, not a coincidence


def documents() -> dict[str, str]:
    """README.md and every Markdown file under docs/, by path relative to the repository."""
    paths = [README, *sorted(DOCS.rglob("*.md"))]
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths}


def fenced_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)


def commands_of(block: str) -> list[str]:
    """The command lines of a shell block, comments stripped."""
    return [line.split("#", 1)[0].strip() for line in block.splitlines()
            if line.split("#", 1)[0].strip()]


def environment_variables_read(source: str) -> set[str]:
    """Names this module reads from a mapping or os.getenv: `env.get("X")`, `env["X"]`,
    `"X" in env`, `os.getenv("X")`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "getenv") and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript):
            key = node.slice
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            key = node.left
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str) \
                and re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+", key.value):
            names.add(key.value)
    return names


def section(text: str, heading: str) -> str:
    """The body of the level-2 section `heading`, up to the next level-2 heading."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"README has no section '## {heading}'"
    return match.group(1)


def table_variables(text: str) -> set[str]:
    """The backticked names in the first column of the Markdown tables in `text`."""
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \|", text, flags=re.M))


def level2_headings(text: str) -> set[str]:
    body = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # a `## ` in a code block is not one
    return {h.strip().lower() for h in re.findall(r"^## (.+)$", body, flags=re.M)}


def paragraphs(text: str) -> set[str]:
    """Blocks between blank lines of PASTED_PARAGRAPH_LINES lines or more, spaces normalized."""
    return {" ".join(b.split()) for b in re.split(r"\n\s*\n", text)
            if len([line for line in b.splitlines() if line.strip()]) >= PASTED_PARAGRAPH_LINES}


def shared(by_file: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """(item, first file, second file) for every item found in two files."""
    seen: dict[str, str] = {}
    pairs = []
    for name, items in by_file.items():
        for item in sorted(items):
            if item in seen:
                pairs.append((item[:80], seen[item], name))
            else:
                seen[item] = name
    return pairs


def markdown_links(text: str) -> list[str]:
    """Relative link targets (no scheme, no pure anchors), without their #anchor."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#", 1)[0] for t in targets
            if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def load_run_all():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


# --- the README ----------------------------------------------------------------------------


def test_readme_is_at_most_200_lines():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (f"README.md has {lines} lines; it is the entry point "
                                       f"(<= {README_MAX_LINES}): move the detail to docs/")


def test_readme_starts_with_the_commands_ci_and_the_makefile_use():
    text = README.read_text()
    first_block = fenced_blocks(text)[0]
    assert text.index("```") < text.index("\n## "), "the commands come before any section"
    assert commands_of(first_block) == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"Makefile has no `{target}` target"


def test_ci_runs_the_readme_test_command_then_every_stack():
    ci = [c for c in commands_of((ROOT / ".ci" / "run").read_text()) if c.startswith("make ")]
    assert ci == ["make test", "make test-protect", "make test-serve", "make test-titan",
                  "make test-214"], ci
    makefile = (ROOT / "Makefile").read_text()
    for command in ci:
        target = command.split()[1]
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"Makefile has no `{target}` target"


def test_the_test_commands_print_the_reasons_of_skipped_tests():
    """A skipped test is a test not run: every pytest line of the test targets groups the skip
    reasons (-rs) in its summary."""
    makefile = (ROOT / "Makefile").read_text()
    lines = [line for line in makefile.splitlines() if "-m pytest" in line]
    assert lines, "no pytest command in the Makefile"
    quiet = [line.strip() for line in lines if not re.search(r"\s-r\w*s\b", line)]
    assert not quiet, f"pytest commands that do not print skip reasons (-rs): {quiet}"


def test_every_environment_variable_read_by_the_config_is_in_the_readme():
    read = environment_variables_read(CONFIG.read_text())
    assert "NEURON_PROFILE" in read, "the reader of config.py found no variable at all"
    listed = table_variables(section(README.read_text(), "Configuration"))
    assert not read - listed, f"read in config.py, missing from README's table: {read - listed}"
    stale = {v for v in listed - read if v.startswith("NEURON_")}
    assert not stale, f"README lists variables config.py does not read: {stale}"


def test_readme_and_docs_links_point_to_existing_files():
    broken = []
    for name, text in documents().items():
        base = (ROOT / name).parent
        broken += [f"{name}: {t}" for t in markdown_links(text) if not (base / t).exists()]
    assert not broken, f"links to missing files: {broken}"


def test_readme_links_every_document():
    linked = {pathlib.PurePosixPath(t).name for t in markdown_links(README.read_text())}
    unlinked = {p.name for p in DOCS.glob("*.md")} - linked
    assert not unlinked, f"docs/ files the README does not link: {unlinked}"


# --- each topic once -----------------------------------------------------------------------


def test_no_level2_heading_in_two_documents():
    pairs = shared({name: level2_headings(text) for name, text in documents().items()})
    assert not pairs, f"a section in two documents (keep each topic in one file): {pairs}"


def test_no_paragraph_pasted_into_two_documents():
    pairs = shared({name: paragraphs(text) for name, text in documents().items()})
    assert not pairs, f"a paragraph in two documents (link to it instead): {pairs}"


def test_the_detectors_find_what_they_look_for():
    a = "# A\n\n## Errors\n\none\ntwo\nthree\n\nshort\n"
    b = "## errors \n\n```\n## not a heading\n```\n\none\n  two\nthree\n"
    assert shared({"a": level2_headings(a), "b": level2_headings(b)}) == [("errors", "a", "b")]
    assert shared({"a": paragraphs(a), "b": paragraphs(b)}) == [("one two three", "a", "b")]
    assert environment_variables_read(
        'import os\nenv = os.environ\nenv.get("A_B", "1")\nenv["C_D"]\n"E_F" in env\n'
        'os.getenv("G_H")\nx = "NOT_READ"\n') == {"A_B", "C_D", "E_F", "G_H"}
    assert markdown_links("[a](docs/x.md#y) [b](https://e.org) [c](#top)") == ["docs/x.md"]


# --- the benchmarks' figures ---------------------------------------------------------------


def test_bench_all_runs_every_benchmark():
    run_all = load_run_all()
    assert run_all.benchmark_scripts(), "no benchmark found in benchmarks/"
    assert {r.script for r in run_all.RUNS} == set(run_all.benchmark_scripts())


def test_performance_page_has_the_machine_and_every_benchmark():
    run_all = load_run_all()
    text = (DOCS / "performance.md").read_text()
    for field in ("CPU", "cores", "memory", "torch", "date"):
        assert re.search(rf"^\| {field} \| .+ \|$", text, flags=re.M), f"no {field} row"
    for script in run_all.benchmark_scripts():
        assert f"## benchmarks/{script}" in text or any(
            run_all.not_run_line(r) in text for r in run_all.RUNS if r.script == script
            and r.python), f"docs/performance.md lacks {script}"


def test_the_published_page_is_never_written_from_a_dirty_tree(tmp_path):
    run_all = load_run_all()
    refusal = run_all.dirty_refusal("a61556e-dirty", run_all.OUT)
    assert refusal and "clean commit" in refusal and "a61556e-dirty" in refusal
    assert run_all.dirty_refusal("a61556e", run_all.OUT) is None
    assert run_all.dirty_refusal("a61556e-dirty", tmp_path / "scratch.md") is None


def test_a_rerun_of_one_benchmark_replaces_only_its_section():
    run_all = load_run_all()
    page = (DOCS / "performance.md").read_text()
    (runs,) = [r for r in run_all.RUNS if r.script == "time_model.py"]
    host = {"torchneuron commit": "abc1234", "date": "2026-12-06 17:40 UTC"}
    once = run_all.splice(page, host, [(runs, "| first |", 1.0)])
    twice = run_all.splice(once, {**host, "torchneuron commit": "def5678"},
                           [(runs, "| second |", 2.0)])
    assert twice.count("## benchmarks/time_model.py") == 1 and "| second |" in twice
    assert "| first |" not in twice
    notes = [line for line in twice.splitlines() if line.startswith(run_all.RERUN_NOTE)]
    # One note, naming the second rerun only (the page may name other benchmarks rerun alone).
    assert len(notes) == 1
    entries = notes[0][len(run_all.RERUN_NOTE):].split("; ")
    mine = [e for e in entries if e.startswith("`benchmarks/time_model.py`")]
    assert mine == ["`benchmarks/time_model.py` at def5678, 2026-12-06 17:40 UTC"]
    headings = [line[len("## benchmarks/"):] for line in twice.splitlines()
                if line.startswith("## benchmarks/")]
    order = [r.script for r in run_all.RUNS]
    assert headings == sorted(headings, key=order.index)
    for script in headings:  # every other section is as the full run wrote it
        if script != "time_model.py":
            mine = twice.split(f"## benchmarks/{script}\n")[1].split("\n## ")[0].rstrip()
            assert mine == page.split(f"## benchmarks/{script}\n")[1].split("\n## ")[0].rstrip()
