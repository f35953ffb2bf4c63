"""No folder of torchneuron/ that holds a runnable script has a module named like a standard
library module. `python torchneuron/serving/tiny_model.py DIR` puts the script's folder first
on sys.path, so a sibling `platform.py` (as serving/ once had) or `html.py` (as compat/ once had)
replaces the standard library's module for everything that process imports, torch and
transformers included; `python -m` hides the clash, a path does not. Folders without a script
keep names that mirror torch's own (`device/random.py`, as `torch.cuda.random`)."""

from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "torchneuron"


def runs_as_script(path: pathlib.Path) -> bool:
    """The module has an `if __name__ == "__main__":` block at top level."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            names = {getattr(n, "id", None) for n in [node.test.left, *node.test.comparators]}
            values = {getattr(n, "value", None) for n in node.test.comparators}
            if "__name__" in names and "__main__" in values:
                return True
    return False


def clashes(folder: pathlib.Path) -> list[str]:
    """Modules and packages of `folder` named like a standard library module."""
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()
                                                      if (p / "__init__.py").exists()}
    return sorted(names & sys.stdlib_module_names)


def script_folders() -> dict[pathlib.Path, list[str]]:
    folders: dict[pathlib.Path, list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if runs_as_script(path):
            folders.setdefault(path.parent, []).append(path.name)
    return folders


def test_no_script_folder_shadows_the_standard_library():
    folders = script_folders()
    assert folders, "no runnable script found: the scan itself is broken"
    bad = {str(folder.relative_to(ROOT.parent)): (scripts, clashes(folder))
           for folder, scripts in folders.items() if clashes(folder)}
    assert not bad, ("folders with runnable scripts whose modules shadow the standard library "
                     f"(folder: (scripts, clashing modules)): {bad}")


def test_the_scan_finds_a_clash(tmp_path):
    # The check above must be able to fail: a folder as serving/ was before its platform.py moved.
    (tmp_path / "tiny_model.py").write_text('if __name__ == "__main__":\n    pass\n')
    (tmp_path / "platform.py").write_text("")
    (tmp_path / "helpers.py").write_text("")
    assert runs_as_script(tmp_path / "tiny_model.py")
    assert not runs_as_script(tmp_path / "helpers.py")
    assert clashes(tmp_path) == ["platform"]
