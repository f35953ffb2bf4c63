"""Run a function on a module right after it is first imported, without importing it: a
meta-path finder that wraps the module's loader. Heavy libraries (transformers) stay unimported
for programs that never use them, and `import torch` pays nothing."""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Callable

_hooks: dict[str, list[Callable]] = {}
_lock = threading.Lock()


class _Loader(importlib.abc.Loader):
    def __init__(self, inner, name: str):
        self._inner = inner
        self._name = name

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        for hook in _hooks.pop(self._name, ()):
            hook(module)

    def __getattr__(self, attr):  # get_source, is_package, ... for inspect and pdb
        return getattr(self._inner, attr)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name not in _hooks:
            return None
        # Ask the other finders, in order (never leaving the list, so an import in another
        # thread meanwhile still passes here), then wrap the loader of the spec found.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader, name)
                return spec
        return None


_finder = _Finder()


def when_imported(name: str, hook: Callable) -> None:
    """`hook(module)` once `name` is imported: now, if it already is."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _hooks.setdefault(name, []).append(hook)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
            return
    hook(module)
