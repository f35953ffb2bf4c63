"""The port tool is a pure source tool: its own modules never import torch, and they import
one another without a cycle (findings.py holds what the scanner and its handlers share)."""

import ast
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# torchneuron/__init__.py registers the device (and so imports torch); stand in for it to see
# what the port package itself pulls in.
PROBE = f"""
import sys, types
package = types.ModuleType("torchneuron")
package.__path__ = [{os.path.join(REPO, "torchneuron")!r}]
sys.modules["torchneuron"] = package
import torchneuron.port.cli, torchneuron.port.engine
assert torchneuron.port.cli.main(["check", {os.path.join(REPO, "tests", "port", "corpus")!r}]) == 1
print("torch" in sys.modules)
"""


def test_port_does_not_import_torch():
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "False"


PORT = os.path.join(REPO, "torchneuron", "port")


def import_graph(folder: str, package: str) -> dict[str, set[str]]:
    """module -> the modules of the same package it imports, read from the sources with ast.
    Every import counts, those under `if TYPE_CHECKING:` too: a cycle there is still a loop a
    reader has to untangle."""
    modules = {name[:-3] for name in os.listdir(folder) if name.endswith(".py")}
    graph: dict[str, set[str]] = {}
    for module in modules:
        with open(os.path.join(folder, module + ".py")) as f:
            tree = ast.parse(f.read())
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level == 0:
                    if not base.startswith(package + "."):
                        continue
                    base = base[len(package) + 1:]
                elif node.level > 1:
                    continue  # above the package
                if base:
                    edges.add(base.split(".")[0])
                else:  # from . import a, b
                    edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                edges.update(alias.name[len(package) + 1:].split(".")[0] for alias in node.names
                             if alias.name.startswith(package + "."))
        graph[module] = {m for m in edges if m in modules and m != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path (first module repeated at the end), or None."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_the_port_package_has_no_import_cycle():
    graph = import_graph(PORT, "torchneuron.port")
    assert {"scanner", "cuda_api", "devices", "findings"} <= set(graph)
    assert "scanner" in graph["engine"] and "findings" in graph["cuda_api"]  # the graph is read
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_handlers_do_not_import_the_scanner():
    graph = import_graph(PORT, "torchneuron.port")
    assert "scanner" not in graph["cuda_api"] | graph["devices"] | graph["findings"]


def test_the_cycle_finder_finds_cycles(tmp_path):
    # The test above could not fail if import_graph or find_cycle missed edges: a package with a
    # loop through a TYPE_CHECKING import, a relative and an absolute import must show it.
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from pkg.c import X\n")
    (tmp_path / "c.py").write_text("from .a import Y\n")
    (tmp_path / "d.py").write_text("import pkg.a\n")
    graph = import_graph(str(tmp_path), "pkg")
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
