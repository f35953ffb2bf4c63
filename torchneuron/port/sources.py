"""Which files to read, and reading them: Python and notebooks, UTF-8 only; binary or
undecodable files are refused with a reason rather than guessed at."""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

SUFFIXES = (".py", ".ipynb")
# directory names never entered while walking (a path given explicitly is always read)
SKIP_DIRS = {"__pycache__", "node_modules", "venv", "site-packages", "build", "dist"}


class SourceError(ValueError):
    """A file that cannot be checked; the message says why."""


def discover(paths: list[str], exclude: list[str] = ()) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not (d.startswith(".") or d in SKIP_DIRS
                                                         or _excluded(d, exclude)))
                for f in sorted(files):
                    full = os.path.join(root, f)
                    if f.endswith(SUFFIXES) and not _excluded(full, exclude):
                        out.append(full)
        else:
            out.append(p)  # missing files are reported when read
    return out


def _excluded(path: str, patterns) -> bool:
    return any(fnmatch.fnmatch(path, pat) or fnmatch.fnmatch(Path(path).name, pat)
               for pat in patterns)


def read(path: str) -> tuple[str, bool]:
    """(text, had a UTF-8 byte-order mark)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise SourceError(e.strerror or str(e)) from None
    if b"\0" in data:
        raise SourceError("binary file")
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        return data[3 if bom else 0:].decode("utf-8"), bom
    except UnicodeDecodeError as e:
        raise SourceError(f"not UTF-8 (byte {e.start}: {data[e.start:e.start + 1]!r})") from None


def write(path: str, text: str, bom: bool) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8")
    tmp = f"{path}.torchneuron-port.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    shutil.copymode(path, tmp)
    os.replace(tmp, path)  # all or nothing
