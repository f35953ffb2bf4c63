"""Every folder says what it owns (issue 48, item 3): a reader who opens a folder learns from one
place what each file in it is for. A Python package under torchneuron/ says it in its
`__init__.py` docstring, which names every module (`config.py`) and subpackage (`nki/`) in it; a
folder under csrc/ says it in its README.md, which names every file by its stem (`Launch` for
Launch.h and Launch.cpp) and every subfolder (`native/`). A new file that its folder does not
mention fails here."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "torchneuron"
CSRC = ROOT / "csrc"
ENTRY_POINTS = {"__init__.py", "__main__.py"}  # the package itself and its `python -m` entry


def packages() -> list[pathlib.Path]:
    return sorted(p.parent for p in PACKAGE.rglob("__init__.py") if "__pycache__" not in p.parts)


def members(package: pathlib.Path) -> list[str]:
    """What a package's docstring must name: `x.py` for a module, `x/` for a subpackage."""
    modules = [p.name for p in package.glob("*.py") if p.name not in ENTRY_POINTS]
    subpackages = [p.name + "/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + subpackages)


def named(name: str, text: str) -> bool:
    """`name` stands in `text` as a whole name, not as the tail of a longer one."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text) is not None


def unnamed_members(package: pathlib.Path) -> list[str]:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    return [m for m in members(package) if not named(m, docstring)]


def csrc_folders() -> list[pathlib.Path]:
    return sorted([CSRC, *(p for p in CSRC.rglob("*") if p.is_dir())])


def unnamed_files(folder: pathlib.Path) -> list[str]:
    """The stems (and subfolders) a csrc folder's README.md does not name; all of them when it
    has none."""
    names = sorted({p.stem for p in folder.iterdir() if p.suffix in (".h", ".cpp")}
                   | {p.name + "/" for p in folder.iterdir() if p.is_dir()})
    readme = folder / "README.md"
    text = readme.read_text() if readme.is_file() else ""
    return [n for n in names if not named(n, text)]


def test_every_torchneuron_package_names_its_modules_and_subpackages():
    missing = {str(p.relative_to(ROOT)): unnamed_members(p) for p in packages()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, "__init__.py docstrings that do not name these members:\n" + \
        "\n".join(f"{k}: {', '.join(v)}" for k, v in missing.items())


def test_every_csrc_folder_has_a_readme_that_names_its_files():
    absent = [str(f.relative_to(ROOT)) for f in csrc_folders() if not (f / "README.md").is_file()]
    assert not absent, "csrc folders without a README.md:\n" + "\n".join(absent)
    missing = {str(f.relative_to(ROOT)): unnamed_files(f) for f in csrc_folders()}
    missing = {k: v for k, v in missing.items() if v}
    assert not missing, "csrc READMEs that do not name these files:\n" + \
        "\n".join(f"{k}: {', '.join(v)}" for k, v in missing.items())


def test_the_checks_find_what_they_look_for(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "__init__.py").write_text("")
    (package / "__main__.py").write_text("")
    (package / "config.py").write_text("")
    (package / "config_more.py").write_text("")
    (package / "__init__.py").write_text('"""`config.py`: the settings; `sub/`: more."""\n')
    assert members(package) == ["config.py", "config_more.py", "sub/"]
    assert unnamed_members(package) == ["config_more.py"]
    folder = tmp_path / "native"
    folder.mkdir()
    (folder / "Launch.h").write_text("")
    (folder / "Launch.cpp").write_text("")
    (folder / "LaunchMore.cpp").write_text("")
    assert unnamed_files(folder) == ["Launch", "LaunchMore"]
    (folder / "README.md").write_text("`Launch.{h,cpp}`: the launch decision.")
    assert unnamed_files(folder) == ["LaunchMore"]
