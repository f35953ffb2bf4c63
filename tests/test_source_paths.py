"""Every source path the documents and the code's comments name exists: a comment or a page that
points at a file which moved or went away sends its reader nowhere. The paths are read from the
Markdown under docs/ and the README, and from the comments and docstrings of the tracked Python
and C++ files; a path is anything under one of the repository's tracked top-level folders
(`csrc/...`, `torchneuron/...`, `tests/...`), checked against the tree as it is now (a `*` is a
glob, `{a,b}` names two), so the test follows files as they move. A path git ignores is an
output the code writes (`reports/ops.json`), not a source path."""

from __future__ import annotations

import io
import pathlib
import re
import subprocess
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Named paths that are not this repository's files, each with the reason.
NOT_OURS = {
    "tests/assets": "TorchTitan's asset folder, relative to the directory TorchTitan runs in "
                    "(tests/distributed/titan_assets.py builds it there)",
}


def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def path_pattern(files: list[str]) -> re.Pattern:
    """A path under a tracked top-level folder: the folder, a slash, then path characters; not
    the tail of a longer path or a URL (no word character, slash or dot before it)."""
    folders = sorted({f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")})
    return re.compile(rf"(?<![\w/.\-])(?:{'|'.join(map(re.escape, folders))})/"
                      r"(?:[\w.*/\-]|\{[\w.,\-]+\})*(?:[\w*/]|\{[\w.,\-]+\})")


def expand_braces(path: str) -> list[str]:
    """`reports/ops.{json,md}` -> `reports/ops.json`, `reports/ops.md`."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [expanded for choice in match.group(1).split(",")
            for expanded in expand_braces(path[:match.start()] + choice + path[match.end():])]


def python_comments(source: str) -> str:
    """Comments and docstrings (string statements) of a Python file."""
    parts, previous = [], tokenize.NEWLINE
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                parts.append(token.string)
            elif token.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.NL,
                                                                tokenize.INDENT, tokenize.DEDENT):
                parts.append(token.string)
            if token.type not in (tokenize.COMMENT,):
                previous = token.type
    except (tokenize.TokenError, SyntaxError):
        return source
    return "\n".join(parts)


def cpp_comments(source: str) -> str:
    return "\n".join(re.findall(r"//[^\n]*|/\*.*?\*/", source, flags=re.S))


def texts(files: list[str]) -> dict[str, str]:
    """What each document or source file says in prose: a whole Markdown file, the comments of
    code."""
    out = {}
    for name in files:
        path = ROOT / name
        if name.endswith(".md") and (name == "README.md" or name.startswith("docs/")):
            out[name] = path.read_text()
        elif name.endswith(".py"):
            out[name] = python_comments(path.read_text())
        elif name.endswith((".cpp", ".h")):
            out[name] = cpp_comments(path.read_text())
    return out


def exists(path: str) -> bool:
    path = path.rstrip("/")
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def ignored_by_git(paths: list[str]) -> set[str]:
    done = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT,
                          input="\n".join(paths), capture_output=True, text=True)
    return set(done.stdout.split())


def exempt(path: str) -> bool:
    return any(path == folder or path.startswith(folder + "/") for folder in NOT_OURS)


def missing_paths(files: list[str]) -> list[str]:
    pattern = path_pattern(files)
    named = [(name, path) for name, text in texts(files).items()
             for named_path in sorted(set(pattern.findall(text)))
             for path in expand_braces(named_path)]
    absent = [(name, path) for name, path in named if not exempt(path) and not exists(path)]
    outputs = ignored_by_git([path.rstrip("/") for _, path in absent])
    return [f"{name}: {path}" for name, path in absent if path.rstrip("/") not in outputs]


def test_every_source_path_named_in_docs_and_comments_exists():
    missing = missing_paths(tracked_files())
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_the_reader_finds_paths_in_prose_and_comments_only():
    files = ["csrc/a.cpp", "torchneuron/b.py"]
    pattern = path_pattern(files)
    text = "see csrc/device/X.cpp, torchneuron/y/ and https://e.org/csrc/z and a/csrc/w."
    assert pattern.findall(text) == ["csrc/device/X.cpp", "torchneuron/y/"]
    assert pattern.findall("(csrc/S.{h,cpp}).") == ["csrc/S.{h,cpp}"]
    assert expand_braces("csrc/S.{h,cpp}") == ["csrc/S.h", "csrc/S.cpp"]
    assert exists("tests/test_source_paths.py") and exists("csrc/*/") \
        and not exists("csrc/NoSuchFile.cpp")
    assert ignored_by_git(["reports/ops.json", "csrc/NoSuchFile.cpp"]) == {"reports/ops.json"}
    source = '"""Doc: csrc/a.cpp."""\nx = "csrc/not_a_comment.cpp"  # csrc/c.h\n'
    assert pattern.findall(python_comments(source)) == ["csrc/a.cpp", "csrc/c.h"]
    assert pattern.findall(cpp_comments('f("csrc/s");  // csrc/d.h\n/* csrc/e\n */')) == \
        ["csrc/d.h", "csrc/e"]
