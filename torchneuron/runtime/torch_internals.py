"""Every PyTorch internal torchneuron patches, re-points or relies on beyond the public API, in
one list (`ENTRIES`), each with the PyTorch version it was checked on and a check that fails,
naming the internal, when a new PyTorch changes it (tests/runtime/test_torch_internals.py runs
them all; `verify_all()` does the same from a program).

Kinds:
  patched      torchneuron replaces or extends a PyTorch function or table for neuron
  re-pointed   a module attribute PyTorch looks up by name is pointed at torchneuron's function
  relied on    a private name, a semi-private protocol or a behaviour torchneuron reads, calls,
               subclasses or assumes
  C++ symbol   a non-public ATen/c10/c10d symbol or header declaration csrc/ binds to

`used_in` names repository paths for Python and bare file names for C++ (csrc/ is reorganized
by layer; a name is found wherever it lives). A use in the code points back here with a comment
`# internal: see runtime/torch_internals.py "<name>"`.

Checks are cheap and deterministic: most read PyTorch's own source or headers (which also makes
them immune to torchneuron's patches, which are live in the checking process) and import heavy
modules (Inductor, Dynamo) only when they run. This module imports nothing of torchneuron's.
"""

from __future__ import annotations

import ast
import ctypes
import functools
import importlib
import inspect
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

CHECKED_ON = "2.13.0"
# Entries checked on both torch versions the project builds against, with a check per version
# where they differ (per_version): 2.13.0 (the CPU wheel, .venv) and 2.14.1 (PyPI's CUDA-enabled
# build used on the CPU, .venv-214).
CHECKED_ON_BOTH = "2.13.0, 2.14.1"
TESTED_BUILDS = {"2.13": "2.13.0+cpu", "2.14": "2.14.1+cu130"}
KINDS = ("patched", "re-pointed", "relied on", "C++ symbol")


class InternalChanged(RuntimeError):
    """A PyTorch internal torchneuron depends on is no longer what it was checked to be."""


class Mismatch(Exception):
    """What a check found different (raised inside checks; `Internal.verify` names the entry)."""


@dataclass(frozen=True)
class Internal:
    name: str  # dotted path, or a short description where there is none
    kind: str  # one of KINDS
    used_in: tuple[str, ...]  # "torchneuron/..." paths, or C++ file names
    why: str
    check: Callable[[], None]  # raises when the internal no longer holds
    covers: tuple[str, ...] = ()  # other dotted paths, C++ names or source markers it covers
    symbols: tuple[str, ...] = ()  # mangled C++ symbols torchneuron._C binds to
    checked_on: str = CHECKED_ON

    def verify(self) -> None:
        """Runs the check; raises InternalChanged naming this internal and both versions."""
        try:
            self.check()
        except Exception as e:  # noqa: BLE001 - any failure means the internal changed
            raise InternalChanged(
                f"PyTorch internal {self.name!r} ({self.kind}, used in {', '.join(self.used_in)}) "
                f"no longer holds on torch {torch.__version__} (checked on {self.checked_on}): "
                f"{type(e).__name__}: {e}. Why torchneuron needs it: {self.why}") from e


# --------------------------------------------------------------------------- check builders
# Each returns a zero-argument check. Runtime checks resolve live objects; source checks read
# PyTorch's file for a module without relying on what is patched in this process.


def _all(*checks: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        for check in checks:
            check()
    return run


def torch_minor() -> str:
    """"2.13" or "2.14": the key of per_version's checks for the running torch."""
    return ".".join(torch.__version__.split("+")[0].split(".")[:2])


def build_variant() -> str:
    """"cuda" for a torch compiled with CUDA (2.14.1 from PyPI, used here on the CPU: CUDA-only
    functions such as torch._C._scatter exist and current_accelerator() names cuda), "cpu" for
    a CPU-only build (the 2.13.0 wheel)."""
    return "cuda" if torch.version.cuda else "cpu"


def per_version(checks: dict[str, Callable[[], None]]) -> Callable[[], None]:
    """The check of the running torch's minor version; a version without one fails."""
    def run() -> None:
        minor = torch_minor()
        if minor not in checks:
            raise Mismatch(f"no check for torch {minor} (checked on {', '.join(checks)})")
        checks[minor]()
    return run


def per_variant(checks: dict[str, Callable[[], None]]) -> Callable[[], None]:
    """The check of the running torch's build variant (build_variant())."""
    def run() -> None:
        checks[build_variant()]()
    return run


def absent(path: str) -> Callable[[], None]:
    """Holds while `path` does not resolve (a name one version or build lacks)."""
    def run() -> None:
        try:
            resolve(path)
        except (Mismatch, AttributeError, ImportError):
            return
        raise Mismatch(f"{path} exists on this torch")
    return run


def resolve(path: str) -> Any:
    """The object at a dotted path, importing the longest module prefix that is a module."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and module_name.startswith(e.name):
                continue  # not a module: an attribute of a shorter prefix
            raise
        break
    else:
        raise Mismatch(f"no module {parts[0]!r}")
    for j in range(i, len(parts)):
        if not hasattr(obj, parts[j]):
            raise Mismatch(f"{'.'.join(parts[:j])} has no attribute {parts[j]!r}")
        obj = getattr(obj, parts[j])
    return obj


def _leading_params(obj: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(obj).parameters)


def exists(path: str, *, params: tuple[str, ...] | None = None, keywords: tuple[str, ...] = (),
           members: tuple[str, ...] = (), of_type: type | None = None) -> Callable[[], None]:
    """`path` resolves; its signature starts with `params` and accepts `keywords`; it has
    `members`; it is an instance of `of_type`."""
    def check() -> None:
        obj = resolve(path)
        if params is not None or keywords:
            names = _leading_params(obj)
            if params is not None and names[:len(params)] != params:
                raise Mismatch(f"{path} takes {names}, expected it to start with {params}")
            missing = [k for k in keywords if k not in names]
            if missing:
                raise Mismatch(f"{path} takes {names}, without {missing}")
        missing = [m for m in members if not hasattr(obj, m)]
        if missing:
            raise Mismatch(f"{path} has no {', '.join(missing)}")
        if of_type is not None and not isinstance(obj, of_type):
            raise Mismatch(f"{path} is a {type(obj).__name__}, expected a {of_type.__name__}")
    return check


def _module_file(module: str) -> Path:
    """The source file of a torch module, found without importing it or its packages."""
    parts = module.split(".")
    if parts[0] != "torch":
        raise Mismatch(f"{module} is not a torch module")
    base = _torch_root().joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    raise Mismatch(f"torch has no module {module} any more")


@functools.cache
def _source_text(module: str) -> str:
    return _module_file(module).read_text(encoding="utf-8")


@functools.cache
def _source_tree(module: str) -> ast.Module:
    return ast.parse(_source_text(module))


def _definition(module: str, qualname: str) -> ast.AST:
    node = _source_tree(module)
    for part in qualname.split("."):
        found = [n for n in getattr(node, "body", ())
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            raise Mismatch(f"{module} no longer defines {qualname}")
        node = found[-1]
    return node


def defines(module: str, qualname: str, params: tuple[str, ...] | None = None,
            decorator: str | None = None) -> Callable[[], None]:
    """PyTorch's source of `module` defines `qualname` (a function, method or class); a
    function's parameters are exactly `params`; it carries `decorator` (source text)."""
    def check() -> None:
        node = _definition(module, qualname)
        if params is not None:
            a = node.args
            names = tuple(x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs))
            if names != params:
                raise Mismatch(f"{module}.{qualname} takes {names}, expected {params}")
        if decorator is not None:
            found = [ast.unparse(d) for d in node.decorator_list]
            if decorator not in found:
                raise Mismatch(f"{module}.{qualname} is decorated {found}, expected {decorator}")
    return check


def _module_has_hook_dicts() -> None:
    """A module keeps its forward, forward-pre and backward hooks in dicts of these names."""
    m = torch.nn.Module()
    for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
        if not isinstance(getattr(m, name, None), dict):
            raise Mismatch(f"torch.nn.Module no longer keeps its hooks in {name}")


def _doc_mentions(path: str, snippets: tuple[str, ...]) -> None:
    """A binding's signature line (pybind writes it into __doc__) names each of `snippets`."""
    doc = resolve(path).__doc__ or ""
    missing = [x for x in snippets if x not in doc]
    if missing:
        raise Mismatch(f"{path}'s signature no longer names {missing}: {doc.splitlines()[:1]}")


def contains(module: str, qualname: str | None, *snippets: str) -> Callable[[], None]:
    """The source of `qualname` in `module` (the whole module for None) contains `snippets`."""
    def check() -> None:
        text = _source_text(module)
        if qualname is not None:
            text = ast.get_source_segment(text, _definition(module, qualname)) or ""
        where = f"{module}.{qualname}" if qualname else module
        missing = [s for s in snippets if s not in text]
        if missing:
            raise Mismatch(f"{where} no longer contains {missing}")
    return check


def loads_global(module: str, name: str, within: str | None = None) -> Callable[[], None]:
    """Code in `module` (in `within`, when given) reads `name` as a bare name at call time, so
    rebinding the module attribute `name` reaches it."""
    def check() -> None:
        node = _definition(module, within) if within else _source_tree(module)
        scopes = [node] if within else [n for n in ast.walk(node)
                                        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            for n in ast.walk(scope):
                if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
                    return
        raise Mismatch(f"no code in {module}{'.' + within if within else ''} reads {name} "
                       "by name any more")
    return check


_FROM_IMPORT = re.compile(r"^\s*from\s+\S+\s+import\s+(\([^)]*\)|[^\n]*)", re.MULTILINE)


@functools.cache
def _modules_binding(package: str, name: str) -> tuple[str, ...]:
    root = _module_file(package).parent
    word = re.compile(rf"\b{re.escape(name)}\b")
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if name in text and any(word.search(m.group(1)) for m in _FROM_IMPORT.finditer(text)):
            relative = path.relative_to(root).with_suffix("")
            found.append(".".join((package, *relative.parts)))
    return tuple(found)


def no_keyword_call(package: str, name: str, keyword: str) -> Callable[[], None]:
    """No module of `package` calls `name(keyword=...)`: a replacement may name that
    parameter differently."""
    call = re.compile(rf"\b{re.escape(name)}\(\s*{re.escape(keyword)}\s*=")

    def check() -> None:
        root = _module_file(package).parent
        found = [str(path.relative_to(root)) for path in sorted(root.rglob("*.py"))
                 if call.search(path.read_text(encoding="utf-8", errors="replace"))]
        if found:
            raise Mismatch(f"{', '.join(found)} call {name}({keyword}=...)")
    return check


def binds_by_name(package: str, name: str, expected: tuple[str, ...]) -> Callable[[], None]:
    """The modules of `package` that bind `name` with `from ... import name` are exactly
    `expected`: each holds its own reference, which a re-point must rebind one by one."""
    def check() -> None:
        found = _modules_binding(package, name)
        if sorted(found) != sorted(expected):
            raise Mismatch(f"modules of {package} that import {name} by name: {sorted(found)}, "
                           f"expected {sorted(expected)}")
    return check


def _torch_root() -> Path:
    return Path(torch.__file__).parent


def header(relative_path: str, *snippets: str) -> Callable[[], None]:
    """The installed header torch/include/<relative_path> declares each of `snippets`."""
    def check() -> None:
        path = _torch_root() / "include" / relative_path
        if not path.is_file():
            raise Mismatch(f"torch no longer ships the header {relative_path}")
        text = path.read_text(encoding="utf-8", errors="replace")
        missing = [s for s in snippets if s not in text]
        if missing:
            raise Mismatch(f"{relative_path} no longer declares {missing}")
    return check


_LIBRARIES = ("libc10.so", "libtorch_cpu.so", "libtorch_python.so")


@functools.cache
def _library(name: str) -> ctypes.CDLL | None:
    path = _torch_root() / "lib" / name
    return ctypes.CDLL(str(path)) if path.is_file() else None


def exported(symbol: str) -> bool:
    """Whether one of torch's shared libraries exports the (mangled) symbol."""
    for name in _LIBRARIES:
        lib = _library(name)
        if lib is None:
            continue
        try:
            lib[symbol]
            return True
        except AttributeError:
            continue
    return False


def exports(*symbols: str) -> Callable[[], None]:
    def check() -> None:
        missing = [s for s in symbols if not exported(s)]
        if missing:
            raise Mismatch(f"torch's libraries no longer export {missing}")
    return check


def _cpp(name: str, used_in: tuple[str, ...], why: str, *checks: Callable[[], None],
         symbols: tuple[str, ...] = (), covers: tuple[str, ...] = ()) -> Internal:
    return Internal(name, "C++ symbol", used_in, why, _all(exports(*symbols), *checks),
                    covers=covers, symbols=symbols)


# (op, dispatch key family, at::native kernel) that csrc/aten/native/Sparse.cpp registers for
# neuron's sparse keys: each must be the very function the CPU and CUDA keys of that family use.
_SPARSE_SHARED_KERNELS = (
    ("_sparse_coo_tensor_with_dims", "Sparse", "new_with_dims_sparse"),
    ("_sparse_coo_tensor_with_dims_and_tensors", "Sparse", "new_with_dims_and_tensor_sparse_symint"),
    ("empty.memory_format", "Sparse", "empty_sparse"),
    ("empty_like", "Sparse", "empty_like_sparse_coo"),
    ("sparse_dim", "Sparse", "sparse_dim_sparse"),
    ("_dimI", "Sparse", "sparse_dim_sparse"),
    ("dense_dim", "Sparse", "dense_dim_sparse"),
    ("_dimV", "Sparse", "dense_dim_sparse"),
    ("_nnz", "Sparse", "_nnz_sparse"),
    ("is_coalesced", "Sparse", "is_coalesced_sparse"),
    ("_coalesced_", "Sparse", "_coalesced_sparse_"),
    ("_indices", "Sparse", "_indices_sparse"),
    ("_values", "Sparse", "_values_sparse"),
    ("indices", "Sparse", "indices_sparse"),
    ("values", "Sparse", "values_sparse"),
    ("sparse_resize_", "Sparse", "sparse_resize_"),
    ("sparse_resize_and_clear_", "Sparse", "sparse_resize_and_clear_"),
    ("copy_", "Sparse", "copy_sparse_wrapper_"),
    ("copy_sparse_to_sparse_", "Sparse", "copy_sparse_"),
    ("empty.memory_format", "SparseCsr", "empty_sparse_compressed"),
    ("empty_like", "SparseCsr", "empty_like_sparse_csr"),
    ("sparse_dim", "SparseCsr", "sparse_dim_sparse_csr"),
    ("dense_dim", "SparseCsr", "dense_dim_sparse_csr"),
    ("_nnz", "SparseCsr", "_nnz_sparse_csr"),
    ("values", "SparseCsr", "values_sparse_csr"),
    ("crow_indices", "SparseCsr", "crow_indices_sparse_csr"),
    ("col_indices", "SparseCsr", "col_indices_sparse_csr"),
    ("ccol_indices", "SparseCsr", "ccol_indices_sparse_csr"),
    ("row_indices", "SparseCsr", "row_indices_sparse_csr"),
    ("copy_", "SparseCsr", "copy_sparse_compressed_"),
)


@functools.cache
def _native_dispatch() -> dict[str, dict[str, str]]:
    """native_functions.yaml (as torchgen ships it for this torch): op name -> key -> kernel."""
    import yaml  # torchgen's own dependency

    path = Path(importlib.import_module("torchgen").__file__).parent / "packaged" / "ATen" / \
        "native" / "native_functions.yaml"
    table: dict[str, dict[str, str]] = {}
    for entry in yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader):
        name = entry["func"].split("(")[0]
        for keys, kernel in (entry.get("dispatch") or {}).items():
            for key in keys.split(","):
                table.setdefault(name, {})[key.strip()] = kernel
    return table


def _comm_functions_only_in_cuda_builds() -> None:
    fn = getattr(torch._C, "_scatter", None)
    # What torchneuron installed (device/comm.py) does not count as the build's own.
    own = fn is not None and not getattr(fn, "__module__", "").startswith("torchneuron")
    wrapped = getattr(fn, "_neuron_comm", False)
    if build_variant() == "cpu" and own:
        raise Mismatch("a CPU-only build has a torch._C._scatter of its own")
    if build_variant() == "cuda" and not (own or wrapped):
        raise Mismatch("a CUDA build has no torch._C._scatter")


def _sparse_kernels_shared_with_cuda(kernels) -> Callable[[], None]:
    def check() -> None:
        table = _native_dispatch()
        wrong = [f"{op} ({family}): {kernel}" for op, family, kernel in kernels
                 if table.get(op, {}).get(f"{family}CPU") != kernel
                 or table.get(op, {}).get(f"{family}CUDA") != kernel]
        if wrong:
            raise Mismatch(f"no longer the kernel SparseCPU and SparseCUDA share: {wrong}")
    return check


# --------------------------------------------------------------------------- behaviour checks


def _multithreading_switch_is_thread_local() -> None:
    get, set_ = torch._C._is_multithreading_enabled, torch._C._set_multithreading_enabled
    before = get()
    seen: list[bool] = []

    def other_thread() -> None:
        set_(not before)
        seen.append(get())
        set_(before)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    if seen != [not before] or get() != before:
        raise Mismatch("torch._C._set_multithreading_enabled is no longer thread-local")


def _neuron_backward_runs_on_calling_thread() -> None:
    x = torch.ones(2, device="neuron", requires_grad=True)
    threads: list[int] = []
    y = x * 2
    y.register_hook(lambda g: threads.append(threading.get_ident()))
    before = torch._C._is_multithreading_enabled()
    torch._C._set_multithreading_enabled(False)
    try:
        y.sum().backward()
    finally:
        torch._C._set_multithreading_enabled(before)
    if threads != [threading.get_ident()]:
        raise Mismatch("with autograd multithreading off, neuron backward work ran on another "
                       "thread")


def _no_graph_task_outside_backward() -> None:
    if torch._C._current_graph_task_id() != -1:
        raise Mismatch("torch._C._current_graph_task_id() is not -1 outside a backward pass")
    seen: list[int] = []
    y = torch.ones(1, requires_grad=True) * 1
    y.register_hook(lambda g: seen.append(torch._C._current_graph_task_id()))
    y.sum().backward()
    if seen == [-1]:
        raise Mismatch("torch._C._current_graph_task_id() is -1 inside a backward pass")


def _missing_kernel_says_could_not_run() -> None:
    try:
        torch.ops.aten._thnn_fused_lstm_cell(torch.zeros(1, 4), torch.zeros(1, 4),
                                             torch.zeros(1, 1))
    except NotImplementedError as e:
        if not str(e).startswith("Could not run"):
            raise Mismatch(f"a missing CPU kernel now reads {str(e)[:80]!r}") from None
        return
    raise Mismatch("aten::_thnn_fused_lstm_cell now has a CPU kernel")


def _conj_view_copies_to_host() -> None:
    x = torch.tensor([1 + 2j, 3 - 4j], device="neuron")
    got = x.conj().cpu()
    if not torch.equal(got, torch.tensor([1 - 2j, 3 + 4j])):
        raise Mismatch(f"a conjugate view copied to the host reads {got}")


def _fake_tensors_know_their_device() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        t = torch.empty(1)
    if not isinstance(t, torch._subclasses.FakeTensor) or t.fake_device.type != "cpu":
        raise Mismatch("a torch._subclasses.FakeTensor no longer carries its fake_device")


def _fake_conv_rules_are_in_the_table() -> None:
    from torch._subclasses import fake_impls

    table = fake_impls.op_implementations_dict
    aten = torch.ops.aten
    for op in (aten.convolution.default, aten._convolution.default,
               aten._convolution.deprecated, aten.convolution_backward.default):
        if not callable(table.get(op)):
            raise Mismatch(f"fake_impls.op_implementations_dict has no rule for {op}")


def _version_counts_inplace_writes() -> None:
    weight = torch.zeros(2)
    before = weight._version
    weight.add_(1)
    with torch.inference_mode():
        weight.mul_(2)  # a normal tensor written in inference mode still counts
    if weight._version != before + 2:
        raise Mismatch(f"two in-place writes moved _version from {before} to {weight._version}")


def _tensor_base_of_a_view() -> None:
    base = torch.ones(3)
    if base[1:]._base is not base:
        raise Mismatch("Tensor._base of a view is not its base")


def _auto_defaults_have_cpu_entries() -> None:
    from torch.nn.modules import linear_cross_entropy_options as options

    for dtype in (torch.float16, torch.bfloat16):
        if ("cpu", dtype) not in options._AUTO_DEFAULTS:
            raise Mismatch(f"_AUTO_DEFAULTS has no ('cpu', {dtype}) entry")


def _config_has_dropped_options() -> None:
    known = resolve("torch._inductor.config.get_config_copy")()
    missing = {"triton.cudagraphs", "cpp_wrapper"} - set(known)
    if missing:
        raise Mismatch(f"Inductor's config has no {sorted(missing)}")


def _lowerings_have_matmuls() -> None:
    table = resolve("torch._inductor.lowering.lowerings")
    aten = torch.ops.aten
    missing = [op for op in (aten.mm.default, aten.addmm.default, aten.permute)
               if op not in table]
    if missing:
        raise Mismatch(f"Inductor's lowerings lack {missing}")


def _linear_pointwise_arguments() -> None:
    op = resolve("torch.ops.mkldnn._linear_pointwise.default")
    got = tuple(a.name for a in op._schema.arguments)
    if got != ("X", "W", "B", "attr", "scalars", "algorithm"):
        raise Mismatch(f"mkldnn::_linear_pointwise takes {got}")


# The c10d ops whose PrivateUse1 kernels torchneuron replaces (distributed/collectives.py), with
# their arguments as checked: the kernels find the group, the tensors each rank must agree on
# (agreement.py), async_op and timeout (direct_calls.py) by position.
C10D_SCHEMAS = {
    "allreduce_": ("tensors", "process_group", "reduce_op", "sparse_indices", "async_op",
                   "timeout"),
    "allreduce_coalesced_": ("tensors", "process_group", "reduce_op", "async_op", "timeout"),
    "broadcast_": ("tensors", "process_group", "root_rank", "root_tensor", "async_op", "timeout"),
    "reduce_": ("tensors", "process_group", "reduce_op", "root_rank", "root_tensor", "async_op",
                "timeout"),
    "allgather_": ("output_tensors", "input_tensors", "process_group", "async_op", "timeout"),
    "_allgather_base_": ("output_tensor", "input_tensor", "process_group", "async_op", "timeout"),
    "allgather_coalesced_": ("output_lists", "input_list", "process_group", "async_op"),
    "allgather_into_tensor_coalesced_": ("outputs", "inputs", "process_group", "async_op"),
    "reduce_scatter_": ("output_tensors", "input_tensors", "process_group", "reduce_op",
                        "async_op", "timeout"),
    "_reduce_scatter_base_": ("output_tensor", "input_tensor", "process_group", "reduce_op",
                              "async_op", "timeout"),
    "reduce_scatter_tensor_coalesced_": ("outputs", "inputs", "process_group", "reduce_op",
                                         "async_op", "timeout"),
    "alltoall_": ("output_tensors", "input_tensors", "process_group", "async_op", "timeout"),
    "alltoall_base_": ("output", "input", "process_group", "output_split_sizes",
                       "input_split_sizes", "async_op", "timeout"),
    "gather_": ("output_tensors", "input_tensors", "process_group", "root_rank", "async_op",
                "timeout"),
    "scatter_": ("output_tensors", "input_tensors", "process_group", "root_rank", "async_op",
                 "timeout"),
    "send": ("tensors", "process_group", "dst", "tag"),
    "recv_": ("tensors", "process_group", "src", "tag"),
    "recv_any_source_": ("tensors", "process_group", "tag"),
    "barrier": ("tensor", "process_group", "device_ids", "async_op", "timeout"),
}


def _c10d_schemas_as_checked() -> None:
    import torch.distributed  # noqa: F401  (registers the c10d ops)

    for op_name, expected in C10D_SCHEMAS.items():
        if not hasattr(torch.ops.c10d, op_name):
            raise Mismatch(f"there is no c10d::{op_name} any more")
        got = tuple(a.name for a in getattr(torch.ops.c10d, op_name).default._schema.arguments)
        if got != expected:
            raise Mismatch(f"c10d::{op_name} takes {got}, expected {expected}")


def _c10d_options_fields() -> None:
    from torch._C import _distributed_c10d as c10d

    fields = {"AllreduceOptions": ("reduceOp", "timeout", "asyncOp"),
              "BroadcastOptions": ("rootRank", "rootTensor", "timeout", "asyncOp"),
              "AllgatherOptions": ("timeout", "asyncOp"),
              "ReduceScatterOptions": ("reduceOp", "timeout", "asyncOp")}
    for cls_name, names in fields.items():
        opts = getattr(c10d, cls_name)()
        missing = [n for n in names if not hasattr(opts, n)]
        if missing:
            raise Mismatch(f"{cls_name} has no {missing}")


def _premul_sum_is_a_reduce_op() -> None:
    import torch.distributed as dist

    op = dist._make_nccl_premul_sum(2.0)
    if op.op != dist.ReduceOp.RedOpType.PREMUL_SUM:
        raise Mismatch("_make_nccl_premul_sum no longer makes a PREMUL_SUM ReduceOp")


def _thnn_fused_cells_exist() -> None:
    for name in ("_thnn_fused_lstm_cell", "_thnn_fused_gru_cell"):
        if not hasattr(torch.ops.aten, name):
            raise Mismatch(f"aten::{name} no longer exists")


def _cpu_flash_attention_ops_as_checked() -> None:
    """The CPU's flash attention kernels, called directly by the kernel library's fast path."""
    aten = torch.ops.aten
    forward = aten._scaled_dot_product_flash_attention_for_cpu.default._schema
    backward = aten._scaled_dot_product_flash_attention_for_cpu_backward.default._schema
    if [a.name for a in forward.arguments][:5] != ["query", "key", "value", "dropout_p",
                                                   "is_causal"] or len(forward.returns) != 2:
        raise Mismatch(f"forward schema changed: {forward}")
    names = [a.name for a in backward.arguments]
    if names[:8] != ["grad_out", "query", "key", "value", "out", "logsumexp", "dropout_p",
                     "is_causal"] or "scale" not in names:
        raise Mismatch(f"backward schema changed: {backward}")


def _op_overloads_carry_their_schema() -> None:
    schema = torch.ops.aten.bernoulli.p._schema
    if [a.name for a in schema.arguments][:2] != ["self", "p"] or \
            not hasattr(schema.arguments[0], "kwarg_only"):
        raise Mismatch("OpOverload._schema no longer lists arguments with name/kwarg_only")
    alpha = torch.ops.aten.add.Tensor._schema.arguments[2]
    if not isinstance(torch.ops.aten.add.Tensor._schema.arguments[0].type, torch.TensorType) or \
            alpha.name != "alpha" or alpha.default_value != 1:
        raise Mismatch("OpOverload._schema's arguments no longer carry their type and default")
    written = torch.ops.aten.add_.Tensor._schema.arguments[0].alias_info
    if written is None or not written.is_write or \
            torch.ops.aten.add.Tensor._schema.arguments[0].alias_info is not None:
        raise Mismatch("OpOverload._schema's arguments no longer say which one an op writes "
                       "(alias_info.is_write)")


def _recurrent_schemas_as_checked() -> None:
    for name in ("lstm.input", "lstm.data", "gru.input", "gru.data", "rnn_tanh.input",
                 "rnn_tanh.data", "rnn_relu.input", "rnn_relu.data"):
        base, overload = name.split(".")
        schema = getattr(getattr(torch.ops.aten, base), overload)._schema
        names = [a.name for a in schema.arguments]
        if "dropout" not in names or "train" not in names or \
                not torch._C._dispatch_has_kernel_for_dispatch_key(
                    f"{schema.name}.{overload}", "CompositeImplicitAutograd"):
            raise Mismatch(f"aten::{name} is no longer a composite with dropout and train: "
                           f"{schema}")


def _op_overloads_name_their_overload() -> None:
    op = torch.ops.aten.add.Tensor
    if op._overloadname != "Tensor" or torch.ops.aten.relu.default._overloadname != "default":
        raise Mismatch("OpOverload._overloadname no longer names the overload ('default' for "
                       "the unnamed one)")


_OP_SUPPORT = "torchneuron/ops/op_support.py"


def _dispatcher_lists_its_ops() -> None:
    names = torch._C._dispatch_get_all_op_names()
    if "aten::add.Tensor" not in names or "aten::nonzero" not in names:
        raise Mismatch("no longer lists operators as 'aten::add.Tensor' (default: 'aten::nonzero')")


def _dispatcher_answers_kernel_questions() -> None:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    if not has("aten::add.Tensor", "CPU") or not has("aten::linear", "CompositeImplicitAutograd") \
            or has("aten::linear", "CPU"):
        raise Mismatch("no longer answers per op name and dispatch key name")


def _core_decompositions_are_op_overloads() -> None:
    from torch._decomp import core_aten_decompositions

    if "aten::addcmul" not in {op.name() for op in core_aten_decompositions()
                               if hasattr(op, "overloadpacket")}:
        raise Mismatch("the core-ATen table no longer has OpOverloads such as aten.addcmul")


def _legacy_type_names_parse() -> None:
    named = type("torch.FloatTensor", (), {})
    if torch.zeros(1, dtype=torch.float64).type(named).dtype != torch.float32:
        raise Mismatch("Tensor.type(cls) no longer reads the class's __name__")


def _transformers_pipeline_maps_integers_without_neuron() -> None:
    """transformers' Pipeline.__init__ (read from its source, not imported) still takes `device`
    as a keyword, reads `hf_device_map`, and maps an integer through its accelerator list, which
    lacks neuron; if a later transformers maps it to neuron itself, the patch should go."""
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        return  # not installed: nothing is patched
    text = (Path(spec.origin).parent / "pipelines" / "base.py").read_text(encoding="utf-8")
    init = next((n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)
                 and n.name == "Pipeline"), None)
    method = init and next((n for n in init.body if isinstance(n, ast.FunctionDef)
                            and n.name == "__init__"), None)
    if method is None:
        raise Mismatch("transformers.pipelines.base.Pipeline.__init__ no longer exists")
    source = ast.get_source_segment(text, method) or ""
    names = [a.arg for a in (*method.args.args, *method.args.kwonlyargs)]
    for snippet in ('getattr(self.model, "hf_device_map", None)',
                    'torch.device(f"cuda:{device}")', 'self.device = torch.device("cpu")'):
        if snippet not in source:
            raise Mismatch(f"Pipeline.__init__ no longer contains {snippet!r}")
    if names[:2] != ["self", "model"] or "device" not in names:
        raise Mismatch(f"Pipeline.__init__ takes {names}, expected self, model, ..., device")
    if "neuron" in source:
        raise Mismatch("Pipeline.__init__ now knows neuron: the patch is no longer needed")


def _transformers_serve_handlers_as_wrapped() -> None:
    """transformers serve (read from its source, not imported): build_server takes
    `generation_state` and its app's lifespan still unloads models without stopping generation;
    the request check and the generate calls torchneuron/ecosystem/transformers_serve.py wraps
    still exist with the arguments it reads, and none refuses max_tokens below 1 itself."""
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or spec.origin is None:
        return  # not installed: nothing is patched
    folder = Path(spec.origin).parent / "cli" / "serving"
    if not folder.is_dir():
        raise Mismatch("transformers.cli.serving no longer exists")
    server = ast.parse((folder / "server.py").read_text(encoding="utf-8"))
    build = next((n for n in server.body if isinstance(n, ast.FunctionDef)
                  and n.name == "build_server"), None)
    if build is None or "generation_state" not in [a.arg for a in build.args.args]:
        raise Mismatch("transformers.cli.serving.server.build_server(generation_state=) is gone")
    lifespan = next((n for n in ast.walk(build) if isinstance(n, ast.AsyncFunctionDef)
                     and n.name == "lifespan"), None)
    if lifespan is None:
        raise Mismatch("build_server's app no longer has its lifespan")
    if "generation_state.shutdown" in ast.unparse(lifespan):
        raise Mismatch("build_server's lifespan now stops generation: the wrapper should go")
    text = (folder / "utils.py").read_text(encoding="utf-8")
    classes = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.ClassDef)}
    if "_validate_request" not in [n.name for n in getattr(classes.get("BaseHandler"), "body",
                                                           ()) if isinstance(n, ast.FunctionDef)]:
        raise Mismatch("transformers.cli.serving.utils.BaseHandler._validate_request is gone")
    for cls in ("GenerateManager", "CBGenerateManager"):
        methods = {n.name: n for n in getattr(classes.get(cls), "body", ())
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for name in ("generate_streaming", "generate_non_streaming"):
            if name not in methods:
                raise Mismatch(f"transformers.cli.serving.utils.{cls}.{name} is gone")
            args = [a.arg for a in methods[name].args.args]
            if args[:5] != ["self", "model", "processor", "inputs", "gen_config"]:
                raise Mismatch(f"{cls}.{name} takes {args}, expected self, model, processor, "
                               "inputs, gen_config, ...")
    if "must be at least 1" in text:
        raise Mismatch("transformers serve now refuses max_tokens below 1 itself")


def _intra_op_threads_are_per_thread_openmp() -> None:
    """With ATen's OpenMP backend, at::get_num_threads() reads the calling thread's OpenMP
    setting after its lazy per-thread setup: omp_set_num_threads(1) on one thread makes that
    thread's ops serial and leaves the process's count (other threads) as it was."""
    process = ctypes.CDLL(None)
    if not hasattr(process, "omp_set_num_threads"):
        return  # no OpenMP runtime in the process: the NKI simulator does nothing
    before, seen = torch.get_num_threads(), []

    def probe():
        torch.get_num_threads()
        process.omp_set_num_threads(1)
        seen.append(torch.get_num_threads())

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    if seen != [1] or torch.get_num_threads() != before:
        raise Mismatch(f"omp_set_num_threads(1) on a thread gave it {seen} intra-op threads and "
                       f"the process {torch.get_num_threads()} (was {before})")


# Mangled names of the non-public symbols torchneuron._C binds to, by group.
_STUB_CALL_PATH = ("_ZN2at6native16DispatchStubImpl12get_call_ptrEN3c1010DeviceTypeEPvS4_S4_",)


def _stub_members(declared_type: str) -> tuple[str, ...]:
    return tuple(f"_ZN2at6native12DispatchStubI{declared_type}EE{member}E"
                 for member in ("4AVX2", "6AVX512", "7DEFAULT"))


_ADD_STUB = "PFvRNS_18TensorIteratorBaseERKN3c106ScalarEENS0_30add_stub_DECLARE_DISPATCH_type"
_MUL_STUB = "PFvRNS_18TensorIteratorBaseEENS0_30mul_stub_DECLARE_DISPATCH_type"
_DIV_STUB = "PFvRNS_18TensorIteratorBaseEENS0_35div_true_stub_DECLARE_DISPATCH_type"
_FILL_STUB = "PFvRNS_14TensorIteratorERKN3c106ScalarEENS0_31fill_stub_DECLARE_DISPATCH_type"
_COPY_STUB = "PFvRNS_14TensorIteratorEbENS0_31copy_stub_DECLARE_DISPATCH_type"
_SUM_STUB = "PFvRNS_14TensorIteratorEENS0_30sum_stub_DECLARE_DISPATCH_type"

# The c10d::Work virtuals NeuronWork and DeferredWork inherit or call (their vtables).
_WORK_VIRTUALS = (
    "_ZN4c10d4Work11isCompletedEv", "_ZN4c10d4Work11synchronizeEv",
    "_ZN4c10d4Work15getFutureResultEv", "_ZN4c10d4Work18blockCurrentStreamEv",
    "_ZN4c10d4Work4waitENSt6chrono8durationIlSt5ratioILl1ELl1000EEEE", "_ZN4c10d4Work5abortEv",
    "_ZNK4c10d4Work10sourceRankEv", "_ZNK4c10d4Work11getDurationEv",
    "_ZNK4c10d4Work14retrieveOpTypeEv", "_ZNK4c10d4Work17getSequencenumberEv",
    "_ZNK4c10d4Work9exceptionEv", "_ZNK4c10d4Work9isSuccessEv") + (
    # torch 2.14 added the virtual Work::getTimeout (Work.hpp), which the vtables inherit.
    ("_ZNK4c10d4Work10getTimeoutEv",) if torch_minor() == "2.14" else ())

# --------------------------------------------------------------------------- the list

_IND = "torch._inductor"
_INDUCTOR_CPU_PATHS = "torchneuron/compile/inductor_cpu_paths.py"
_INDUCTOR_PY = "torchneuron/compile/inductor.py"
_AOTI_PY = "torchneuron/compile/aoti.py"
_FUSION_COMPILER = "torchneuron/fused_eager/compiler.py"
_ONEDNN = "torchneuron/compile/onednn_gemm.py"
_COLLECTIVES = "torchneuron/distributed/collectives.py"
_DIRECT = "torchneuron/distributed/direct_calls.py"
_CHANNEL = "torchneuron/distributed/agreement_channel.py"
_FR = "torchneuron/distributed/flight_recorder.py"
_COMPAT_CASES = "torchneuron/compat/ops/cases.py"
# The static constructor Inductor calls on every wrapper codegen class.
_WRAPPER_CREATE = ("is_subgraph", "subgraph_name", "parent_wrapper", "partition_signatures")

ENTRIES: tuple[Internal, ...] = (
    # ---- registration (torchneuron/__init__.py, runtime/, device/)
    Internal(
        "torch._register_device_module", "relied on", ("torchneuron/__init__.py",),
        "exposes the device module as torch.neuron; PyTorch's documented PrivateUse1 route, "
        "private by name",
        exists("torch._register_device_module", params=("device_type", "module"))),
    Internal(
        "torch._C._set_multithreading_enabled", "relied on",
        ("torchneuron/runtime/autograd_threads.py",),
        "the autograd engine hands every non-CPU device's backward work to a per-device thread "
        "unless this thread-local switch is off; off, neuron backward runs on the calling "
        "thread and saves ~100 us per backward()",
        _all(exists("torch._C._set_multithreading_enabled"),
             exists("torch._C._is_multithreading_enabled"),
             _multithreading_switch_is_thread_local, _neuron_backward_runs_on_calling_thread)),
    Internal(
        "torch.utils.checkpoint reads torch.neuron._initialized", "relied on",
        ("torchneuron/device",),
        "checkpoint saves and restores the device RNG around a recomputation only when the "
        "device module's _initialized is true (dropout masks in backward)",
        contains("torch.utils.checkpoint", None, 'getattr(device_module, "_initialized", False)'),
        covers=("torch.neuron._initialized",)),
    Internal(
        "torch.random.manual_seed reads torch.neuron._is_in_bad_fork", "relied on",
        ("torchneuron/device",),
        "torch.manual_seed seeds the PrivateUse1 device only when its module has "
        "_is_in_bad_fork and manual_seed_all",
        contains("torch.random", None, '_bad_fork_name = "_is_in_bad_fork"',
                 '_seed_all_name = "manual_seed_all"'),
        covers=("torch.neuron._is_in_bad_fork",)),

    # ---- serving
    Internal(
        "torch.accelerator.empty_host_cache", "patched", ("torchneuron/serving/host_cache.py",),
        "vLLM's shutdown calls it on every platform but the CPU, and PyTorch 2.13's crashes on "
        "a device without an at::HostAllocator; in vLLM's processes it empties nothing on "
        "neuron (the platform pins no memory)",
        _all(defines("torch.accelerator.memory", "empty_host_cache", params=()),
             exists("torch.accelerator.empty_host_cache"))),

    Internal(
        "torch.Tensor._version", "relied on", ("torchneuron/serving/packed_linear.py",),
        "a linear weight's oneDNN-packed copy is made again when the weight was written in "
        "place, which only its version counter tells (every in-place op moves it, in "
        "inference mode too)",
        _version_counts_inplace_writes),

    # ---- runtime
    Internal(
        "torch.Tensor.__dlpack__", "patched", ("torchneuron/runtime/host_access.py",),
        "under NEURON_MEMORY_PROTECT=1 a neuron tensor's DLPack export is refused by name: the "
        "protocol's method, torch.utils.dlpack.to_dlpack and torch.to_dlpack hand a consumer the raw address of "
        "device memory, which the host may not read outside the runtime seam (the wrapper "
        "passes every argument on: torch 2.14 added read_only)",
        _all(per_version({
                 "2.13": defines("torch._tensor", "Tensor.__dlpack__",
                                 params=("self", "stream", "max_version", "dl_device", "copy")),
                 "2.14": defines("torch._tensor", "Tensor.__dlpack__",
                                 params=("self", "stream", "max_version", "dl_device", "copy",
                                         "read_only"))}),
             exists("torch.utils.dlpack.to_dlpack"), exists("torch.to_dlpack")),
        checked_on=CHECKED_ON_BOTH,
        covers=("torch.utils.dlpack.to_dlpack", "torch.to_dlpack")),

    # ---- device
    Internal(
        "torch._C._acceleratorGraph", "relied on", ("torchneuron/device/graphs.py",),
        "NeuronGraph subclasses torch.accelerator.Graph (over the binding torch._C."
        "_acceleratorGraph, which creates the graph implementation registered for the "
        "accelerator) and calls the binding's capture_begin with a pool and capture mode, as "
        "torch.cuda.CUDAGraph.capture_begin takes them",
        _all(exists("torch._C._acceleratorGraph",
                    members=("capture_begin", "capture_end", "replay", "reset", "pool",
                             "instantiate", "enable_debug_mode", "debug_dump")),
             lambda: _doc_mentions("torch._C._acceleratorGraph.capture_begin",
                                   ("pool:", "capture_error_mode:")),
             exists("torch.accelerator.Graph"))),
    Internal(
        "torch.nn.Module._forward_hooks / _forward_pre_hooks / _backward_hooks", "relied on",
        ("torchneuron/device/graphs.py",),
        "make_graphed_callables refuses a module with hooks, as torch.cuda's does (a replay "
        "would skip them); PyTorch has no public way to ask whether a module has hooks",
        lambda: _module_has_hook_dicts(),
        covers=("torch.nn.Module._forward_hooks", "torch.nn.Module._forward_pre_hooks",
                "torch.nn.Module._backward_hooks")),
    Internal(
        "torch.utils._pytree.arg_tree_leaves", "relied on", ("torchneuron/device/graphs.py",),
        "make_graphed_callables flattens a callable's sample arguments as torch.cuda's does",
        exists("torch.utils._pytree.arg_tree_leaves"),
        covers=("torch.utils._pytree.tree_leaves", "torch.utils._pytree.tree_unflatten")),
    Internal(
        "torch.multiprocessing.reductions.reduce_storage", "relied on",
        ("torchneuron/device/ipc.py",),
        "every tensor torch.multiprocessing sends reduces through its storage; a neuron storage "
        "is reduced to a descriptor of shareable device memory the receiver maps (and the "
        "tensor is rebuilt over it by torch's own rebuild_tensor), the rest through torch's own "
        "reduce_storage",
        _all(defines("torch.multiprocessing.reductions", "reduce_storage", params=("storage",)),
             contains("torch.multiprocessing.reductions", "reduce_tensor",
                      "storage = tensor._typed_storage()"),
             contains("torch.multiprocessing.reductions", "reduce_typed_storage",
                      "storage._untyped_storage"))),

    Internal(
        "torch._C._scatter", "patched", ("torchneuron/device/comm.py",),
        "nn.parallel.comm hands DataParallel's scatter, gather and broadcasts to torch._C "
        "functions only CUDA builds have; in a build without them (the 2.13.0 CPU wheel) "
        "comm.py provides them for neuron devices (the integer indices comm passes can only "
        "mean neuron there); in a CUDA build (PyPI's 2.14.1, used on the CPU) CUDA's serve "
        "CUDA tensors and neuron's the others",
        _all(_comm_functions_only_in_cuda_builds,contains("torch.nn.parallel.comm", "scatter",
                      "torch._C._scatter(tensor, devices, chunk_sizes, dim, streams)",
                      "torch._C._scatter_out(tensor, out, dim, streams)"),
             contains("torch.nn.parallel.comm", "gather", "torch._C._gather(tensors, dim, "
                      "destination)", "torch._C._gather_out(tensors, out, dim)"),
             contains("torch.nn.parallel.comm", "broadcast", "torch._C._broadcast(tensor, "
                      "devices)", "torch._C._broadcast_out(tensor, out)"),
             contains("torch.nn.parallel.comm", "broadcast_coalesced",
                      "torch._C._broadcast_coalesced(tensors, devices, buffer_size)")),
        covers=("torch._C._gather", "torch._C._broadcast", "torch._C._broadcast_coalesced",
                "torch._C._scatter_out", "torch._C._gather_out", "torch._C._broadcast_out",
                "torch._C.?"),
        checked_on=CHECKED_ON_BOTH),
    Internal(
        "torch.nn.parallel.comm.reduce_add", "re-pointed", ("torchneuron/device/comm.py",),
        "DataParallel's backward sums gradients with reduce_add (through reduce_add_coalesced, "
        "which looks it up by name), whose NCCL probe warns on every step in a build without "
        "NCCL; neuron tensors take its non-NCCL path without the probe",
        _all(defines("torch.nn.parallel.comm", "reduce_add", params=("inputs", "destination")),
             loads_global("torch.nn.parallel.comm", "reduce_add",
                          within="reduce_add_coalesced"),
             contains("torch.nn.parallel.comm", "reduce_add", "nccl.is_available(inputs)"))),
    Internal(
        "torch._C._len_torch_dispatch_stack", "relied on", ("torchneuron/ops/recurrent.py",),
        "the recurrent ops run the CPU's whole op on copies, except under a dispatch mode "
        "(torch.compile's fake tensors, functionalization), where they decompose as ATen's "
        "composite (OpOverload.decompose); the ops' `dropout` and `train` arguments are found "
        "by name in their schema",
        _all(exists("torch._C._len_torch_dispatch_stack"),
             exists("torch.ops.aten.lstm.input.decompose"), _op_overloads_carry_their_schema,
             _recurrent_schemas_as_checked),
        covers=("._schema", "torch.ops.aten.?.?._schema", "OpOverload.decompose")),
    Internal(
        "torch._storage_classes", "patched", ("torchneuron/device/legacy_types.py",),
        "torch.neuron's legacy typed storages join the set as torch.cuda's do (torch.is_storage "
        "and serialization read it)",
        exists("torch._storage_classes", of_type=set)),
    Internal(
        "torch.storage._LegacyStorage", "relied on", ("torchneuron/device/legacy_types.py",),
        "torch.neuron.FloatStorage and its siblings subclass it as torch.cuda's storages do; "
        "it finds their device from the class's module name, which must be torch.neuron; "
        "Tensor.storage_type() looks the class up on torch.neuron",
        _all(exists("torch.storage._LegacyStorage"),
             exists("torch.storage._warn_typed_storage_removal"),
             exists("torch._utils.classproperty"),
             contains("torch.storage", "_get_device_from_module",
                      "torch._C._get_privateuse1_backend_name()"),
             contains("torch.storage", "TypedStorage._get_legacy_storage_class",
                      "getattr(module, storage_name)")),
        covers=("torch.storage._warn_typed_storage_removal", "torch._utils.classproperty",
                "torch.storage._LegacyStorage._dtype")),
    Internal(
        "Tensor.type(cls) reads the class's C-level type name", "relied on",
        ("torchneuron/device/legacy_types.py",),
        "Tensor.type(torch.neuron.FloatTensor) parses the type object's tp_name, which for a "
        "Python class is its __name__: the classes carry the dotted name",
        _legacy_type_names_parse, covers=("Tensor.type(cls)",)),

    # ---- ops
    Internal(
        "torch._tensor_str._tensor_str", "patched", ("torchneuron/ops/dtype_policy.py",),
        "print(neuron tensor) formats a host copy: PyTorch lays it out with float64 arithmetic "
        "on the tensor itself, which the float64 policy refuses",
        _all(defines("torch._tensor_str", "_tensor_str", params=("self", "indent")),
             loads_global("torch._tensor_str", "_tensor_str", within="_str_intern"))),
    Internal(
        "torch.amp.GradScaler.unscale_", "patched", ("torchneuron/ops/autocast.py",),
        "unscale_ computes 1/scale in float64 (sparing only MPS); a neuron scaler runs it "
        "under the float64 policy 'allow'",
        _all(defines("torch.amp.grad_scaler", "GradScaler.unscale_", params=("self", "optimizer")),
             exists("torch.amp.GradScaler", members=("unscale_",)))),
    Internal(
        "torch.amp.GradScaler._device", "relied on", ("torchneuron/ops/autocast.py",),
        "the patched unscale_ tells a neuron scaler from others by its _device string",
        contains("torch.amp.grad_scaler", "GradScaler.__init__", "self._device = device"),
        covers=("._device",)),
    Internal(
        "torch.nn.modules.linear_cross_entropy_options._AUTO_DEFAULTS", "patched",
        ("torchneuron/ops/linear_cross_entropy.py",),
        "F.linear_cross_entropy's chunked path picks accumulation and chunking per "
        "(device type, dtype); neuron gets the CPU's entries (torch 2.13; 2.14 has "
        "_auto_acc_policy instead)",
        per_version({"2.13": _all(_auto_defaults_have_cpu_entries,
                                  contains("torch.nn.modules.linear_cross_entropy_options",
                                           "LinearCrossEntropyOptions._adjust",
                                           "_AUTO_DEFAULTS.get(")),
                     "2.14": absent("torch.nn.modules.linear_cross_entropy_options._AUTO_DEFAULTS")}),
        checked_on=CHECKED_ON_BOTH),
    Internal(
        "torch.nn.modules.linear_cross_entropy_options._auto_acc_policy", "re-pointed",
        ("torchneuron/ops/linear_cross_entropy.py",),
        "torch 2.14's replacement of _AUTO_DEFAULTS: the accumulation policy as a function of "
        "(device type, dtype), looked up by name in LinearCrossEntropyOptions._adjust; neuron "
        "is answered as the CPU ('accurate' for float16/bfloat16)",
        per_version({"2.13": absent("torch.nn.modules.linear_cross_entropy_options._auto_acc_policy"),
                     "2.14": _all(defines("torch.nn.modules.linear_cross_entropy_options",
                                          "_auto_acc_policy", params=("device_type", "dtype")),
                                  loads_global("torch.nn.modules.linear_cross_entropy_options",
                                               "_auto_acc_policy",
                                               within="LinearCrossEntropyOptions._adjust"))}),
        checked_on=CHECKED_ON_BOTH),
    Internal(
        "torch.nn.modules.linear_cross_entropy_options.LinearCrossEntropyOptions."
        "_resolve_auto_acc_dtype", "patched", ("torchneuron/ops/linear_cross_entropy.py",),
        "answers float32 accumulation for float16/bfloat16 on the CPU and None on devices it "
        "does not know; neuron is answered as the CPU",
        _all(defines("torch.nn.modules.linear_cross_entropy_options",
                     "LinearCrossEntropyOptions._resolve_auto_acc_dtype",
                     params=("dtype", "device"), decorator="staticmethod"),
             contains("torch.nn.modules.linear_cross_entropy_options", None,
                      "self._resolve_auto_acc_dtype(dtype, device)"))),

    # ---- compile: registration with Inductor and Dynamo
    Internal(
        "torch._inductor.codegen.common.init_backend_registration", "relied on",
        ("torchneuron/compile/__init__.py",),
        "Inductor looks up Scheduling/PythonWrapperCodegen/CppWrapperCodegen/WrapperFxCodegen "
        "on the PrivateUse1 device module (via _get_custom_mod_func, which turns an "
        "AttributeError into a RuntimeError Inductor ignores): the moment torchneuron "
        "registers neuron with Inductor",
        _all(contains(f"{_IND}.codegen.common", "init_backend_registration",
                      '_get_custom_mod_func("Scheduling")',
                      '_get_custom_mod_func("PythonWrapperCodegen")',
                      '_get_custom_mod_func("CppWrapperCodegen")',
                      '_get_custom_mod_func("WrapperFxCodegen")', "except RuntimeError"),
             contains("torch.utils.backend_registration", "_get_custom_mod_func",
                      "getattr(custom_device_mod, func_name, None)", "raise RuntimeError"))),
    Internal(
        f"{_IND}.codegen.common.register_backend_for_device", "relied on", (_INDUCTOR_PY,),
        "registers the C++ scheduling and neuron's wrapper codegens, and the custom pass whose "
        "uuid keys Inductor's cache (FxGraphHashDetails reads custom_backend_passes)",
        _all(exists(f"{_IND}.codegen.common.register_backend_for_device",
                    params=("device", "device_scheduling", "device_wrapper_codegen",
                            "device_cpp_wrapper_codegen", "device_fx_wrapper_codegen",
                            "device_custom_pass")),
             contains(f"{_IND}.codecache", None, "custom_backend_passes"))),
    Internal(
        f"{_IND}.codegen.common.register_device_op_overrides", "relied on", (_INDUCTOR_PY,),
        "the device housekeeping lines of the generated wrapper",
        exists(f"{_IND}.codegen.common.register_device_op_overrides",
               params=("device", "device_op_overrides"))),
    Internal(
        "torch._dynamo.device_interface.register_interface_for_device", "relied on",
        (_INDUCTOR_PY,),
        "the device interface Dynamo and Inductor query for neuron",
        exists("torch._dynamo.device_interface.register_interface_for_device",
               params=("device", "device_interface"))),
    Internal(
        f"{_IND}.codegen.cpp.CppScheduling", "relied on", (_INDUCTOR_PY,),
        "neuron kernels are Inductor's C++ kernels, generated by the CPU's scheduling",
        exists(f"{_IND}.codegen.cpp.CppScheduling", of_type=type)),
    Internal(
        f"{_IND}.codegen.wrapper.PythonWrapperCodegen", "relied on", (_INDUCTOR_PY,),
        "subclassed: neuron's wrapper overrides make_allocation, write_header, create, "
        "generate_after_suffix and the private _generate_kernel_call_helper, and calls "
        "codegen_python_shape_tuple, wrap_kernel_call, writeline, imports and reads "
        "launcher_fn_name (the graph's call, wrapped to queue as one item)",
        _all(exists(f"{_IND}.codegen.wrapper.PythonWrapperCodegen.make_allocation",
                    params=("self", "name", "device", "dtype", "shape", "stride",
                            "allocation_shape", "is_pinned")),
             exists(f"{_IND}.codegen.wrapper.PythonWrapperCodegen._generate_kernel_call_helper",
                    params=("self", "kernel_name", "call_args"), keywords=("device", "triton")),
             exists(f"{_IND}.codegen.wrapper.PythonWrapperCodegen.create",
                    params=_WRAPPER_CREATE),
             exists(f"{_IND}.codegen.wrapper.PythonWrapperCodegen",
                    members=("write_header", "codegen_python_shape_tuple", "wrap_kernel_call",
                             "writeline")),
             exists(f"{_IND}.codegen.wrapper.PythonWrapperCodegen.generate_after_suffix",
                    params=("self", "result")),
             contains(f"{_IND}.codegen.wrapper", "PythonWrapperCodegen.__init__",
                      "self.imports = "),
             contains(f"{_IND}.codegen.wrapper", "PythonWrapperCodegen.write_launcher_fn_call_get_indent",
                      "def {self.launcher_fn_name}(args):")),
        covers=("._generate_kernel_call_helper",)),
    Internal(
        f"{_IND}.codegen.wrapper.SubgraphPythonWrapperCodegen", "relied on", (_INDUCTOR_PY,),
        "subclassed for the bodies of cond/while_loop/invoke_subgraph",
        exists(f"{_IND}.codegen.wrapper.SubgraphPythonWrapperCodegen.__init__",
               params=("self", "subgraph_name", "parent_wrapper", "partition_signatures"))),
    Internal(
        f"{_IND}.codegen.wrapper_fxir.WrapperFxCodegen", "relied on", (_INDUCTOR_PY,),
        "the FX wrapper codegen neuron registers unchanged",
        exists(f"{_IND}.codegen.wrapper_fxir.WrapperFxCodegen", of_type=type)),
    Internal(
        f"{_IND}.codegen.cpp_wrapper_cpu.CppWrapperCpu", "relied on", (_INDUCTOR_PY,),
        "subclassed so that cpp_wrapper=True on neuron raises by name in create()",
        exists(f"{_IND}.codegen.cpp_wrapper_cpu.CppWrapperCpu.create", params=_WRAPPER_CREATE)),
    Internal(
        f"{_IND}.aoti_compile_and_package", "patched", (_AOTI_PY,),
        "wrapped on torch._inductor's import: a program exported on neuron is moved to the CPU "
        "and compiled by AOTInductor's CPU C++ wrapper, with neuron's entries added to the "
        "inductor config aot_inductor.metadata, which the package keeps and its loader's "
        "get_metadata() returns",
        _all(exists(f"{_IND}.aoti_compile_and_package", params=("exported_program",),
                    keywords=("package_path", "inductor_configs")),
             contains(f"{_IND}.codecache", None, "metadata = config.aot_inductor.metadata"),
             exists(f"{_IND}.config.aot_inductor.metadata", of_type=dict))),
    Internal(
        "torch.export.pt2_archive._package.AOTICompiledModel", "patched", (_AOTI_PY,),
        "__init__ wrapped on the module's import: a model whose package says neuron gets "
        "neuron's loader; __call__ flattens the inputs and calls self.loader.boxed_run, and "
        "load_package and load_pt2 both construct one",
        _all(exists("torch.export.pt2_archive._package.AOTICompiledModel.__init__",
                    params=("self", "loader")),
             contains("torch.export.pt2_archive._package", "AOTICompiledModel.__call__",
                      "self.loader.boxed_run(flat_inputs)"))),
    Internal(
        f"{_IND}.codegen.cpu_device_op_overrides.CpuDeviceOpOverrides", "relied on",
        (_INDUCTOR_PY,),
        "subclassed: set_device, synchronize and device_guard write neuron's lines",
        _all(exists(f"{_IND}.codegen.cpu_device_op_overrides.CpuDeviceOpOverrides.set_device",
                    params=("self", "device_idx")),
             exists(f"{_IND}.codegen.cpu_device_op_overrides.CpuDeviceOpOverrides.synchronize",
                    params=("self",)),
             exists(f"{_IND}.codegen.cpu_device_op_overrides.CpuDeviceOpOverrides.device_guard",
                    params=("self", "device_idx")))),
    Internal(
        f"{_IND}.custom_graph_pass.CustomGraphModulePass", "relied on", (_INDUCTOR_PY,),
        "neuron's CodegenFingerprint is a pass whose uuid() adds the torchneuron sources, "
        "the matmul setting and the thread count to Inductor's cache key",
        _all(exists(f"{_IND}.custom_graph_pass.CustomGraphModulePass",
                    members=("uuid", "__call__")),
             exists(f"{_IND}.custom_graph_pass.get_hash_for_files", params=("paths", "extra"))),
        covers=(f"{_IND}.custom_graph_pass.get_hash_for_files",)),
    Internal(
        f"{_IND}.utils.parallel_num_threads", "relied on", (_INDUCTOR_PY,),
        "the thread count Inductor specializes C++ kernels on, keyed for neuron graphs too",
        _all(exists(f"{_IND}.utils.parallel_num_threads", params=()),
             exists(f"{_IND}.config.cpp.dynamic_threads")),
        covers=(f"{_IND}.config.cpp.dynamic_threads",)),
    Internal(
        f"{_IND}.config.test_configs.track_memory_lifecycle", "relied on", (_INDUCTOR_PY,),
        "neuron's fast allocation line steps aside when Inductor tracks buffer lifecycles",
        exists(f"{_IND}.config.test_configs.track_memory_lifecycle")),
    Internal(
        f"{_IND}.virtualized.V.graph.get_current_device_or_throw", "relied on",
        (_INDUCTOR_PY, _INDUCTOR_CPU_PATHS),
        "the device of the graph being lowered, where a call does not pass one",
        exists(f"{_IND}.graph.GraphLowering.get_current_device_or_throw", params=("self",))),
    Internal(
        "torch._dynamo.device_interface.DeviceInterface", "relied on",
        ("torchneuron/compile/device_interface.py",),
        "subclassed: NeuronInterface overrides its methods (the private _set_stream_by_id "
        "included) and fills the compile workers' caches the way Inductor's own interfaces do",
        _all(exists("torch._dynamo.device_interface.DeviceInterface",
                    members=("Worker", "current_device", "set_device", "exchange_device",
                             "maybe_exchange_device", "device_count", "is_available",
                             "stream", "current_stream", "set_stream", "_set_stream_by_id",
                             "get_raw_stream", "synchronize", "get_compute_capability",
                             "is_bf16_supported", "memory_allocated", "is_triton_capable")),
             exists("torch._dynamo.device_interface.DeviceInterface._set_stream_by_id",
                    params=("stream_id", "device_index", "device_type")),
             exists("torch._dynamo.device_interface.caching_worker_current_devices",
                    of_type=dict),
             exists("torch._dynamo.device_interface.caching_worker_device_properties",
                    of_type=dict)),
        covers=("torch._dynamo.device_interface.caching_worker_current_devices",
                "torch._dynamo.device_interface.caching_worker_device_properties")),
    Internal(
        f"{_IND}.config options and modes", "relied on", ("torchneuron/compile/backend.py",),
        "backend='neuron' validates options against Inductor's config, expands modes with "
        "list_mode_options(), reads triton.cudagraphs as 'capture device graphs' and drops "
        "cpp_wrapper by name",
        _all(exists(f"{_IND}.list_mode_options"), _config_has_dropped_options),
        covers=(f"{_IND}.config.get_config_copy", f"{_IND}.list_mode_options")),
    Internal(
        "torch._functorch.config.enable_autograd_cache", "patched",
        ("torchneuron/compile/backend.py",),
        "off while reduce-overhead compiles a graph: AOTAutograd's cache answers a warm graph "
        "without calling compile_fx's inner_compile, which is where each compiled graph is "
        "wrapped in device graphs (Inductor's FX graph cache, inside compile_fx_inner, stays on)",
        _all(exists("torch._functorch.config.enable_autograd_cache", of_type=bool),
             contains("torch._functorch._aot_autograd.autograd_cache", None,
                      "config.enable_autograd_cache")),
        covers=("torch._functorch.config.patch",)),
    Internal(
        f"{_IND}.compile_fx.compile_fx", "relied on", ("torchneuron/compile/backend.py",),
        "backend='neuron' is Inductor's compile_fx with neuron's config patches and, for "
        "reduce-overhead, an inner compile that wraps each compiled graph in device graphs",
        exists(f"{_IND}.compile_fx.compile_fx", params=("model_", "example_inputs_"),
               keywords=("config_patches", "inner_compile"))),

    # ---- compile: Inductor's "cpu" tests, re-pointed for neuron (inductor_cpu_paths.py)
    Internal(
        f"{_IND}.scheduler.BaseSchedulerNode.is_cpu", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "true for neuron nodes too: the scheduler then skips loop reordering the C++ kernel "
        "generator does not support",
        _all(defines(f"{_IND}.scheduler", "BaseSchedulerNode.is_cpu", params=("self",)),
             defines(f"{_IND}.scheduler", "BaseSchedulerNode.get_device"))),
    Internal(
        f"{_IND}.utils.get_current_backend", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "answers config.cpu_backend ('cpp') for neuron instead of the GPU's backend; rebound in "
        "every Inductor module that imported it by name, so that list must stay known (the "
        "replacement names its parameter `device`, so no caller may pass device_type=)",
        _all(defines(f"{_IND}.utils", "get_current_backend", params=("device_type",)),
             no_keyword_call(_IND, "get_current_backend", "device_type"),
             binds_by_name(_IND, "get_current_backend",
                           (f"{_IND}.codegen.common", f"{_IND}.kernel.mm_common",
                            f"{_IND}.scheduler")),
             exists(f"{_IND}.config.cpu_backend", of_type=str)),
        covers=("setattr(module, attr)", f"{_IND}.config.cpu_backend",
                f"{_IND}.codegen.common", f"{_IND}.kernel.mm_common")),
    Internal(
        f"{_IND}.utils.use_scatter_fallback", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "neuron scatter-adds take the CPU's rule (ATen's kernel with more than one thread); "
        "rebound in the modules that imported it by name",
        _all(defines(f"{_IND}.utils", "use_scatter_fallback",
                     params=("op_overload", "reduction_type", "self_dtype", "src_dtype",
                             "src_device_type", "src_is_tensor")),
             binds_by_name(_IND, "use_scatter_fallback",
                           (f"{_IND}.decomposition", f"{_IND}.lowering"))),
        covers=("setattr(module, attr)",)),
    Internal(
        f"{_IND}.ir.is_cpu", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "the C++ backend's thresholds for materializing intermediates apply to neuron",
        _all(defines(f"{_IND}.ir", "is_cpu", params=("x",)),
             loads_global(f"{_IND}.ir", "is_cpu"))),
    Internal(
        f"{_IND}.lowering.use_two_step_variance", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "LayerNorm/var_mean statistics in two vectorized passes on neuron, as on the CPU",
        _all(defines(f"{_IND}.lowering", "use_two_step_variance",
                     params=("x", "axis", "keepdim", "input_dtype")),
             loads_global(f"{_IND}.lowering", "use_two_step_variance"),
             exists(f"{_IND}.config.cpp.use_two_step_variance_threshold", of_type=int),
             defines(f"{_IND}.lowering", "_validate_reduction_axis", params=("x", "axis")),
             exists(f"{_IND}.utils.sympy_product", params=("it",))),
        covers=(f"{_IND}.config.cpp.use_two_step_variance_threshold",
                f"{_IND}.lowering._validate_reduction_axis", f"{_IND}.utils.sympy_product")),
    Internal(
        f"{_IND}.lowering.div_prim", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "a division by a constant stays a division on neuron, as on the CPU (other devices "
        "multiply by the reciprocal); re-registered as prims.div's lowering and rebound where "
        "lowering.py calls it by name; the original is reached through __wrapped__",
        _all(defines(f"{_IND}.lowering", "div_prim", params=("a", "b"),
                     decorator="register_lowering([prims.div], broadcast=True)"),
             loads_global(f"{_IND}.lowering", "div_prim", within="div"),
             exists(f"{_IND}.lowering.div_prim.__wrapped__"),
             exists(f"{_IND}.lowering.get_constant_value", params=("x",)),
             exists(f"{_IND}.lowering.make_pointwise", params=("fn",)),
             exists(f"{_IND}.virtualized.ops", members=("truediv",))),
        covers=(f"{_IND}.lowering.get_constant_value", f"{_IND}.lowering.make_pointwise",
                f"{_IND}.virtualized.ops")),
    Internal(
        f"{_IND}.lowering.register_lowering", "relied on", (_INDUCTOR_CPU_PATHS, _ONEDNN),
        "how torchneuron installs its lowerings (prims.div; aten.mm/addmm on neuron)",
        exists(f"{_IND}.lowering.register_lowering",
               params=("aten_fn", "broadcast", "type_promotion_kind"))),
    Internal(
        f"{_IND}.graph.SUPPORTED_MKLDNN_DEVICES", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "with neuron in it, decide_layout_opt plans channels-last activations for neuron "
        "convolutions (oneDNN's kernel), as for the CPU's",
        _all(exists(f"{_IND}.graph.SUPPORTED_MKLDNN_DEVICES", of_type=tuple),
             loads_global(f"{_IND}.graph", "SUPPORTED_MKLDNN_DEVICES",
                          within="GraphLowering.decide_layout_opt"))),
    Internal(
        f"{_IND}.kernel.conv.ir", "re-pointed", (_INDUCTOR_CPU_PATHS,),
        "conv.py's device test is ir.get_device_type on its module reference `ir`; a proxy "
        "answers 'cpu' for neuron there, so the bias stays inside the oneDNN convolution",
        contains(f"{_IND}.kernel.conv", None, "from .. import config, ir", "ir.get_device_type("),
        covers=(f"{_IND}.kernel.conv", f"{_IND}.ir.?")),
    Internal(
        f"{_IND}.ir.get_device_type", "relied on", (_INDUCTOR_CPU_PATHS, _ONEDNN),
        "the device type of an IR node: how torchneuron's re-pointed tests and the matmul "
        "lowering recognize neuron",
        exists(f"{_IND}.ir.get_device_type", params=("x",))),

    # ---- compile: matmuls on oneDNN (onednn_gemm.py)
    Internal(
        f"{_IND}.lowering.lowerings", "patched", (_ONEDNN,),
        "aten.mm/addmm lowerings are wrapped so that large float32 neuron matmuls lower to "
        "oneDNN's linear; the wrapped ones are looked up in this table",
        _all(exists(f"{_IND}.lowering.lowerings", of_type=dict), _lowerings_have_matmuls,
             exists(f"{_IND}.lowering.fallback_handler",
                    params=("kernel", "add_to_fallback_set"))),
        covers=(f"{_IND}.lowering.fallback_handler",)),
    Internal(
        "torch.ops.mkldnn._linear_pointwise.default", "relied on",
        (_ONEDNN, "torchneuron/compile/gemm_by_size.py"),
        "oneDNN's inner product, called as linear(X, W, B, attr, scalars, algorithm)",
        _linear_pointwise_arguments),
    Internal(
        f"{_IND}.virtualized.V.graph.sizevars", "relied on", (_ONEDNN,),
        "size hints and static equality decide whether a matmul goes to oneDNN",
        _all(exists(f"{_IND}.sizevars.SizeVarAllocator.optimization_hint",
                    params=("self", "expr"), keywords=("fallback",)),
             exists(f"{_IND}.sizevars.SizeVarAllocator.statically_known_equals",
                    params=("self", "left", "right")))),

    # ---- compile: tracing predicts the CPU's convolution layout (conv_layout.py)
    Internal(
        "torch._subclasses.fake_impls.op_implementations_dict", "patched",
        ("torchneuron/compile/conv_layout.py",),
        "the fake-tensor convolution rules are wrapped so a traced neuron convolution answers "
        "in the CPU's layout (the PrivateUse1 'Overrideable' path always says contiguous)",
        _all(_fake_conv_rules_are_in_the_table,
             contains("torch._subclasses.fake_impls", "dispatch_to_op_implementations_dict",
                      "op_implementations_dict[func](fake_mode, func, *args, **kwargs)")),
        covers=("torch._subclasses.fake_impls", "torch.ops.aten._convolution.default",
                "torch.ops.aten._convolution.deprecated")),
    Internal(
        "torch._subclasses.FakeTensor", "relied on",
        ("torchneuron/compile/conv_layout.py", "torchneuron/device/memory_explain.py",
         "torchneuron/device/memory_breakdown.py"),
        "neuron fake tensors are told apart by fake_device; the memory advisor tells a "
        "fake-traced step (no allocator figures) from a real one",
        _fake_tensors_know_their_device),
    Internal(
        "torch.distributed._tools.mem_tracker.MemTracker", "relied on",
        ("torchneuron/device/memory_breakdown.py",),
        "the memory advisor measures a step's peak by category (parameters, gradients, "
        "optimizer state, activations, temporaries) and each module's forward peaks with it, "
        "reading its snapshots' _MemRefType names and _ModState phases",
        exists("torch.distributed._tools.mem_tracker.MemTracker",
               members=("track_external", "get_tracker_snapshot", "reset_mod_stats"))),
    Internal(
        "torch.distributed._tools.mem_tracker._ModState", "relied on",
        ("torchneuron/device/memory_breakdown.py",),
        "the memory advisor reads a module's forward and backward peaks and its activations "
        "before and after its forward from MemTracker's per-module snapshots, keyed by these",
        exists("torch.distributed._tools.mem_tracker._ModState",
               members=("PRE_FW", "POST_FW", "PEAK_FW", "PEAK_BW")),
        covers=tuple(f"torch.distributed._tools.mem_tracker._ModState.{m}"
                     for m in ("PRE_FW", "POST_FW", "PEAK_FW", "PEAK_BW"))),
    Internal(
        "torch.utils._pytree.tree_map", "relied on", ("torchneuron/compile/conv_layout.py",),
        "maps a convolution's arguments between neuron and CPU fake tensors",
        exists("torch.utils._pytree.tree_map", params=("func", "tree"))),

    Internal(
        "torch.utils._python_dispatch.TorchDispatchMode", "relied on",
        ("torchneuron/compat/random_draws.py", "torchneuron/timemodel/trace.py"),
        "the model battery records the random draws of the CPU run and replays their values in "
        "the neuron run; the time model records every ATen op of a step traced under "
        "FakeTensorMode (subclassed as the documented way to intercept ATen calls)",
        exists("torch.utils._python_dispatch.TorchDispatchMode",
               members=("__torch_dispatch__", "__enter__", "__exit__"))),
    Internal(
        "torch.utils._pytree.tree_flatten", "relied on",
        ("torchneuron/compat/random_draws.py", "torchneuron/timemodel/trace.py",
         "torchneuron/readiness/steps.py", "torchneuron/device/graphs.py"),
        "make_graphed_callables flattens a callable's outputs as torch.cuda's does; "
        "flattens an op's outputs to find the tensors a recorded draw produced, and a traced "
        "op's arguments and results to record their shapes (the time model)",
        exists("torch.utils._pytree.tree_flatten", params=("tree",))),
    Internal(
        "torch._ops.OpOverload._schema", "relied on",
        ("torchneuron/compat/random_draws.py", "torchneuron/fused_eager/ops.py",
         "torchneuron/ops/op_support.py",
         "torchneuron/fused_eager/queue_feeder.py", "torchneuron/fused_eager/graph.py",
         "torchneuron/fused_eager/runtime_scalars.py", "torchneuron/compile/reduce_overhead.py"),
        "reads a dispatched op's argument names and defaults (the generator, p) to tell a draw; "
        "fused eager asks its rule only of OpOverloads, names ops as the C++ core does (schema name and _overloadname), passes a queued "
        "op's kwarg-only arguments by name, and finds a runtime scalar's argument position, "
        "type and default; the op-support rule reads an op's returns (no tensor: an assert or "
        "a predicate); reduce-overhead reads which arguments an op writes (alias_info)",
        _all(_op_overloads_carry_their_schema,
             exists("torch._C.FunctionSchema", members=("is_mutable", "returns", "name")),
             _op_overloads_name_their_overload),
        covers=("._schema", "torch._ops.OpOverload", "._overloadname")),

    # ---- fused eager: chains compiled with Inductor outside Dynamo (torchneuron/fused_eager)
    Internal(
        "torch._guards.tracing", "relied on", (_FUSION_COMPILER,),
        "a chain compiles inside a TracingContext whose fake mode has a ShapeEnv: without one "
        "Inductor bypasses its FX graph cache ('No shape env') and nothing is cached on disk",
        _all(exists("torch._guards.tracing", params=("context",)),
             exists("torch._guards.TracingContext", params=("fake_mode",)),
             contains(f"{_IND}.codecache", None, "No shape env")),
        covers=("torch._guards.TracingContext", f"{_IND}.codecache")),
    Internal(
        "torch._subclasses.fake_tensor.FakeTensorMode", "relied on",
        (_FUSION_COMPILER, "torchneuron/fused_eager/chain.py", "torchneuron/timemodel/trace.py"),
        "a chain's example inputs and result layouts are fake tensors made from its metadata "
        "(static shapes), so compiling needs no real memory; the time model builds and runs a "
        "70B model under it at full size without allocating it",
        exists("torch._subclasses.fake_tensor.FakeTensorMode", keywords=("shape_env",))),
    Internal(
        "torch._dynamo.utils.get_compilation_metrics", "relied on",
        ("torchneuron/device/accounting.py",),
        "the readiness accounting reads Dynamo's per-compile records for recompiles (their "
        "recompile_reason and code location) and dynamic=True compiles (dynamo_config's "
        "assume_static_by_default false), counted as the records added during a block",
        _all(exists("torch._dynamo.utils.get_compilation_metrics"),
             defines("torch._dynamo.utils", "CompilationMetrics"),
             contains("torch._dynamo.utils", "CompilationMetrics", "recompile_reason",
                      "dynamo_config", "co_filename", "co_firstlineno"))),
    Internal(
        "torch.profiler.profile.step", "patched", ("torchneuron/readiness/steps.py",),
        "while `torchneuron readiness` runs a script, a profiler's step() also ends a step of "
        "the report (scripts without an optimizer); the method is put back when the run ends",
        exists("torch.profiler.profile.step", params=("self",))),
    Internal(
        "torch._dynamo.mark_dynamic", "re-pointed", ("torchneuron/device/accounting.py",),
        "while the readiness accounting is on, torch._dynamo.mark_dynamic is wrapped to count "
        "each use with the caller's line (TorchNeuron's torch.compile refuses dynamic shapes); "
        "the original is put back when the accounting stops",
        exists("torch._dynamo.mark_dynamic")),
    Internal(
        "torch._dynamo.utils.counters", "relied on", (_FUSION_COMPILER,),
        "what Inductor's FX graph cache answered a chain's compile (hit, miss, bypass), read as "
        "differences around it",
        _all(exists("torch._dynamo.utils.counters", of_type=dict),
             contains(f"{_IND}.codecache", None, '"fxgraph_cache_hit"', '"fxgraph_cache_miss"',
                      '"fxgraph_cache_bypass"'))),
    Internal(
        f"{_IND}.compile_fx.compile_fx_inner", "relied on",
        (_FUSION_COMPILER, "torchneuron/compile/backend.py", "torchneuron/compile/reduce_overhead.py"),
        "fused eager compiles a chain's graph, already in the form AOTAutograd hands Inductor "
        "(functional steps, then copy_ into the buffers), with compile_fx_inner: the returned "
        "graph is called without AOTAutograd's runtime wrappers (a 20-op chain on 16 floats: "
        "~11 us per call instead of ~17); the FX graph cache is inside it. reduce-overhead "
        "wraps it as compile_fx's inner_compile: compile_fx passes it static_input_idxs (the "
        "parameters and buffers, captured in place) and it returns a boxed callable",
        _all(exists(f"{_IND}.compile_fx.compile_fx_inner", params=("gm", "example_inputs")),
             contains(f"{_IND}.compile_fx", None, "static_input_idxs="))),
    Internal(
        "torch._dynamo.utils.preserve_rng_state", "patched",
        ("torchneuron/fused_eager/background_rng.py",),
        "Inductor's compile saves and restores the process's CPU random state around codegen; on "
        "fused mode's compile thread the restore rewound random numbers the caller drew "
        "meanwhile, so a thread-aware wrapper skips it there (compile_fx reads the module "
        "attribute at call time)",
        _all(exists("torch._dynamo.utils.preserve_rng_state"),
             contains(f"{_IND}.compile_fx", None, "dynamo_utils.preserve_rng_state()"))),
    Internal(
        f"{_IND}.codegen.cpp.TilingSelect", "patched", ("torchneuron/fused_eager/vector_interleave.py",),
        "a fused chain's kernel steps by four SIMD vectors so that its math overlaps (a chain of "
        "Sleef calls stepped by one vector waits on their latency): a thread-aware wrapper of "
        "select_tiling widens the one-level tiling factor on fused mode's compile only "
        "(CppKernelProxy instantiates TilingSelect by name at each kernel; the factor becomes "
        "VectorizedN<float,4> through the vector kernel's num_vectors)",
        _all(exists(f"{_IND}.codegen.cpp.TilingSelect.select_tiling",
                    params=("self", "fn_list", "var_sizes_list")),
             contains(f"{_IND}.codegen.cpp", None, "tiling_select = TilingSelect()",
                      "VectorizedN<"))),
    Internal(
        f"{_IND}.cpu_vec_isa.pick_vec_isa", "relied on", ("torchneuron/fused_eager/vector_interleave.py",),
        "the SIMD width Inductor generates for (float elements per vector), which the fused "
        "chain's wider tiling is a multiple of",
        exists(f"{_IND}.cpu_vec_isa.pick_vec_isa", params=())),
    Internal(
        "torch.compiler.config.cache_key_tag", "relied on", ("torchneuron/fused_eager/vector_interleave.py",),
        "a fused chain's compile tags Inductor's FX graph cache key, so its wider-stepped kernels "
        "and a user's torch.compile of the same graph are cached apart",
        _all(exists("torch.compiler.config.cache_key_tag"),
             contains(f"{_IND}.codecache", None, "cache_key_tag"))),
    Internal(
        f"{_IND}.decomposition.select_decomp_table", "relied on", (_FUSION_COMPILER,),
        "a chain's graph is decomposed with Inductor's own table before compile_fx_inner, as "
        "compile_fx does through AOTAutograd",
        exists(f"{_IND}.decomposition.select_decomp_table", params=())),
    Internal(
        f"{_IND}.config.cpp.threads", "relied on", (_FUSION_COMPILER,),
        "a chain's kernel is generated for the thread count in its signature (set through "
        "Inductor's config.patch, not torch.set_num_threads, which is process-wide), and "
        "emulate_precision_casts rounds float16/bfloat16 intermediates as eager does",
        _all(exists(f"{_IND}.config.cpp.threads", of_type=int),
             exists(f"{_IND}.config.emulate_precision_casts", of_type=bool),
             exists(f"{_IND}.config.patch")),
        covers=(f"{_IND}.config.emulate_precision_casts", f"{_IND}.config.patch")),
    Internal(
        f"{_IND}.runtime.cache_dir_utils.cache_dir", "relied on", ("torchneuron/fused_eager/policy.py",),
        "where Inductor's FX graph cache keeps compiled chains (reported by fused_eager.stats())",
        _all(exists(f"{_IND}.runtime.cache_dir_utils.cache_dir", params=()),
             contains(f"{_IND}.codecache", "FxGraphCache._get_tmp_dir", '"fxgraph"'))),

    # ---- distributed
    Internal(
        "torch.distributed.Backend._plugins", "relied on", ("torchneuron/distributed/backend.py",),
        "register() is idempotent by looking up its own registration there",
        exists("torch.distributed.Backend._plugins", of_type=dict)),
    Internal(
        "torch.distributed.ProcessGroup private backend table",
        "relied on", (_COLLECTIVES, _DIRECT, _CHANNEL, _FR),
        "_get_backend, _register_backend, _device_types: a neuron-only group gets the CPU "
        "entry its gloo backend serves; the hot collectives call the CPU backend directly",
        exists("torch.distributed.ProcessGroup",
               members=("_get_backend", "_register_backend", "_device_types", "BackendType",
                        "unbox")),
        covers=("._get_backend", "._register_backend", "._device_types")),
    Internal(
        "torch.distributed.ProcessGroupGloo private collectives",
        "relied on", (_DIRECT, _CHANNEL),
        "_allgather_base and _reduce_scatter_base, gloo's flat collectives, called directly "
        "on the group's backend",
        exists("torch.distributed.ProcessGroupGloo",
               members=("_allgather_base", "_reduce_scatter_base", "allreduce", "broadcast")),
        covers=("._allgather_base", "._reduce_scatter_base")),
    Internal(
        "torch.ops.c10d.<op>.default._schema", "relied on",
        (_COLLECTIVES, _DIRECT, "torchneuron/distributed/agreement.py",
         "torchneuron/distributed/checked_collectives.py"),
        "torchneuron replaces the PrivateUse1 kernels of these c10d ops and reads their "
        "arguments by position (C10D_SCHEMAS, checked against collectives.C10D_OPS)",
        _c10d_schemas_as_checked,
        covers=("torch.ops.c10d.?.default._schema", "C10D_OPS", "AGREEING_ARGS", "DIRECT")),
    Internal(
        "torch._C._distributed_c10d option classes", "relied on", (_DIRECT,),
        "the direct calls build gloo's options themselves (reduceOp, rootRank, rootTensor, "
        "timeout, asyncOp)",
        _c10d_options_fields,
        covers=tuple(f"torch._C._distributed_c10d.{c}" for c in (
            "AllgatherOptions", "AllreduceOptions", "BroadcastOptions", "ReduceScatterOptions"))),
    Internal(
        "torch._C._current_graph_task_id", "relied on", ("torchneuron/distributed/sequencer.py",),
        "tells whether a collective is issued from a backward pass (-1 outside one)",
        _no_graph_task_outside_backward),
    Internal(
        "torch.autograd.Variable._execution_engine.queue_callback", "relied on",
        ("torchneuron/distributed/sequencer.py",),
        "the end of a backward pass waits for deferred collectives, as DDP finalizes buckets",
        exists("torch.autograd.Variable._execution_engine.queue_callback")),
    Internal(
        "torch._C._distributed_c10d._dump_fr_trace", "re-pointed", (_FR,),
        "PyTorch's on-demand flight-recorder dump returns the dump completed by the backend "
        "(group table, states, the collective a rank waits in); the original is kept and called",
        exists("torch._C._distributed_c10d._dump_fr_trace")),
    Internal(
        "c10d FlightRecorder dump format", "relied on", (_FR,),
        "the completed dump keeps PyTorch's format (version 2.10: entries with state, retired, "
        "process_group, collective_seq_id, op_id; pg_config keyed by group name), which fr_trace "
        "reads",
        header("torch/csrc/distributed/c10d/FlightRecorder.hpp",
               'DEFINE_CONSTANT(version_val, "2.10")', 'DEFINE_CONSTANT(retired_key, "retired")',
               'DEFINE_CONSTANT(pg_config_key, "pg_config")',
               'DEFINE_CONSTANT(scheduled_state, "scheduled")')),
    Internal(
        "torch.distributed.distributed_c10d._world", "relied on", (_FR,),
        "the group table of a dump: every group's name, description and global ranks",
        exists("torch.distributed.distributed_c10d._world",
               members=("pg_names", "pg_group_ranks", "pg_map"))),
    Internal(
        "torch.distributed.distributed_c10d._get_default_store", "relied on",
        ("torchneuron/distributed/forensics.py",),
        "a rank that gives up on a collective reports to the others through the rendezvous store",
        exists("torch.distributed.distributed_c10d._get_default_store", params=())),
    Internal(
        "torch.distributed.ProcessGroupGloo._get_sequence_number_for_group", "relied on", (_FR,),
        "gloo's count of a group's collectives: the sequence number of a collective the "
        "recorder has no entry for",
        exists("torch.distributed.ProcessGroupGloo",
               members=("_get_sequence_number_for_group",))),
    Internal(
        "distributed_c10d.barrier / monitored_barrier", "re-pointed",
        ("torchneuron/distributed/barriers.py",),
        "dist.barrier on a neuron group is checked like any collective first (it reaches gloo "
        "on CPU tensors, past the backend's kernels); dist.monitored_barrier accepts neuron "
        "groups, whose CPU backend is gloo, and runs PyTorch's own steps after its backend check",
        _all(defines("torch.distributed.distributed_c10d", "barrier",
                     params=("group", "async_op", "device_ids", "timeout")),
             defines("torch.distributed.distributed_c10d", "monitored_barrier",
                     params=("group", "timeout", "wait_all_ranks")),
             # 2.13 refuses any backend not named gloo; 2.14 any group without a CPU backend
             # (a neuron group has gloo for the CPU): the wrapper serves both.
             per_version({
                 "2.13": contains("torch.distributed.distributed_c10d", "monitored_barrier",
                                  "if get_backend(group) != Backend.GLOO:",
                                  "timeout = _get_default_timeout(get_backend(group))",
                                  "_check_valid_timeout(timeout)",
                                  "return group_to_use.monitored_barrier("),
                 "2.14": contains("torch.distributed.distributed_c10d", "monitored_barrier",
                                  'if torch.device("cpu") not in group_to_use._device_types:',
                                  "timeout = _get_default_timeout(get_backend(group))",
                                  "_check_valid_timeout(timeout)",
                                  "return group_to_use.monitored_barrier(")}),
             exists("torch.distributed.distributed_c10d._rank_not_in_group"),
             exists("torch.distributed.distributed_c10d._get_default_group")),
        covers=("torch.distributed.distributed_c10d.barrier",
                "torch.distributed.distributed_c10d.monitored_barrier",
                "torch.distributed.barrier", "torch.distributed.monitored_barrier",
                "torch.distributed.distributed_c10d._rank_not_in_group",
                "torch.distributed.distributed_c10d._get_default_group",
                "torch.distributed.distributed_c10d._get_default_timeout",
                "torch.distributed.distributed_c10d._check_valid_timeout"),
        checked_on=CHECKED_ON_BOTH),

    # ---- compat battery (torchneuron/compat/)
    Internal(
        "torch.testing._internal.common_methods_invocations", "relied on", (_COMPAT_CASES,),
        "the op battery runs PyTorch's OpInfo databases",
        contains("torch.testing._internal.common_methods_invocations", None,
                 "\nop_db: list[OpInfo] = [", "\npython_ref_db = [",
                 "\nforeach_unary_op_db: list[OpInfo] = ["),
        covers=("torch.testing._internal.common_methods_invocations.?",
                "torch.testing._internal.common_methods_invocations.op_db",
                "torch.testing._internal.common_methods_invocations.python_ref_db")),
    Internal(
        "torch.testing._internal.opinfo.core", "relied on", (_COMPAT_CASES,),
        "OpInfo classes group the report; DecorateInfo.is_active says which skips and "
        "tolerances apply to the device-vs-CPU test",
        _all(defines("torch.testing._internal.opinfo.core", "DecorateInfo.is_active",
                     params=("self", "cls_name", "test_name", "device_type", "dtype",
                             "param_kwargs")),
             *(defines("torch.testing._internal.opinfo.core", c) for c in (
                 "BinaryUfuncInfo", "ReductionOpInfo", "SpectralFuncInfo", "UnaryUfuncInfo"))),
        covers=tuple(f"torch.testing._internal.opinfo.core.{c}" for c in (
            "BinaryUfuncInfo", "ReductionOpInfo", "SpectralFuncInfo", "UnaryUfuncInfo"))),
    Internal(
        "torch.testing._internal.common_device_type.toleranceOverride / precisionOverride",
        "relied on", (_COMPAT_CASES,),
        "an OpInfo's tolerances are read from these decorators' dict `d`",
        _all(contains("torch.testing._internal.common_device_type", "toleranceOverride.__init__",
                      "self.d = d"),
             contains("torch.testing._internal.common_device_type", "precisionOverride.__init__",
                      "self.d = d")),
        covers=("torch.testing._internal.common_device_type.precisionOverride",
                "torch.testing._internal.common_device_type.toleranceOverride")),
    Internal(
        "torch.testing._comparison.default_tolerances", "relied on", (_COMPAT_CASES,),
        "an OpInfo's tolerance is never stricter than assert_close's default",
        exists("torch.testing._comparison.default_tolerances")),
    Internal(
        "torch.testing._utils.wrapper_set_seed", "relied on", (_COMPAT_CASES,),
        "random OpInfos call it by name; the battery finds them by that name in their code",
        defines("torch.testing._utils", "wrapper_set_seed")),
    Internal(
        "torch.testing._internal.opinfo.core.OpInfo.sample_inputs_sparse", "relied on",
        ("torchneuron/compat/ops/runner.py", _COMPAT_CASES),
        "the battery's sparse units (the crash battery, issue 47) take an OpInfo's sparse "
        "samples through it; its supports_sparse* flags say which layouts it samples; an OpInfo "
        "without samples for a dtype raises SkipTest('NO SAMPLES!'), one without a sample "
        "function for a flagged layout NotImplementedError('no sample function specified')",
        _all(defines("torch.testing._internal.opinfo.core", "OpInfo.sample_inputs_sparse",
                     params=("self", "layout", "device", "dtype", "requires_grad")),
             contains("torch.testing._internal.opinfo.core", "OpInfo.sample_inputs_sparse",
                      "NO SAMPLES!"),
             contains("torch.testing._internal.opinfo.core", None,
                      "no sample function specified", "supports_sparse_csr: bool",
                      "supports_sparse_csc: bool", "supports_sparse_bsr: bool",
                      "supports_sparse_bsc: bool", "supports_sparse: bool"))),
    Internal(
        "torch.Tensor._base", "relied on",
        (_COMPAT_CASES, "torchneuron/timemodel/trace.py", "torchneuron/device/memory_breakdown.py"),
        "a view sample moves to neuron as a view of its moved base; the time model tells a "
        "weight's view (a linear layer's `t()` of its weight) from an activation by its base, "
        "so a compiled graph's pricing reads weights from HBM; the memory advisor counts a "
        "view's memory once, by its base",
        _tensor_base_of_a_view, covers=("._base",)),

    # ---- C++ (csrc/): non-public symbols and behaviours
    _cpp("at::GraphImplRegistry / at::GraphImplInterface", ("NeuronGraph.cpp", "NeuronGraph.h"),
         "torch.accelerator.Graph creates the implementation registered under the device "
         "type's name (c10::DeviceTypeName, so neuron's is known only after the rename); "
         "NeuronGraph implements the interface and registers itself at run time",
         header("ATen/core/GraphImplInterface.h",
                "TORCH_DECLARE_REGISTRY(GraphImplRegistry, GraphImplInterface, GraphImplArgs)",
                "struct TORCH_API GraphImplInterface", "virtual void capture_begin(",
                "MempoolId_t pool = {0, 0}", "virtual void debug_dump(const std::string& path)"),
         covers=("at::GraphImplArgs", "at::GraphCaptureMode")),
    _cpp("at::native::DispatchStubImpl::get_call_ptr (x86-64 capability parameters)",
         ("CpuStubs.h",),
         "kernels call the CPU implementation of a DispatchStub; its call path takes one "
         "parameter per CPU capability torch was built with, which CpuStubs.h declares",
         header("ATen/native/DispatchStub.h", "HAVE_AVX512_CPU_DEFINITION",
                "HAVE_AVX2_CPU_DEFINITION", "void* get_call_ptr("),
         symbols=_STUB_CALL_PATH, covers=("HAVE_AVX512_CPU_DEFINITION",)),
    _cpp("at::native::add_stub / mul_stub / div_true_stub", ("Arithmetic.cpp",),
         "the arithmetic fast path runs the CPU's stub on a TensorIterator over neuron memory",
         header("ATen/native/BinaryOps.h", "add_stub", "mul_stub", "div_true_stub",
                "sub_check(", "alpha_check("),
         symbols=("_ZN2at6native8add_stubE", "_ZN2at6native8mul_stubE",
                  "_ZN2at6native13div_true_stubE", *_stub_members(_ADD_STUB),
                  *_stub_members(_MUL_STUB), *_stub_members(_DIV_STUB)),
         covers=("at::native::add_stub", "at::native::mul_stub", "at::native::div_true_stub",
                 "at::native::sub_check", "at::native::alpha_check")),
    _cpp("at::native::sum_stub", ("Reductions.cpp",),
         "the sum fast path runs the CPU's reduction stub on a reduction TensorIterator over "
         "neuron memory, its result shaped and viewed with the CPU's own reduction helpers",
         _all(header("ATen/native/ReduceOps.h", "sum_stub"),
              header("ATen/native/ReduceOpsUtils.h", "inline DimMask make_dim_mask(",
                     "inline DimVector shape_from_dim_mask(",
                     "inline Tensor review_reduce_result(")),
         symbols=("_ZN2at6native8sum_stubE", *_stub_members(_SUM_STUB)),
         covers=("at::native::sum_stub", "at::native::DimMask", "at::native::make_dim_mask",
                 "at::native::shape_from_dim_mask", "at::native::review_reduce_result")),
    _cpp("torch::CapturedTraceback::gather", ("MemoryHistory.cpp", "MemoryHistory.h"),
         "memory history records the Python stack of each allocation and free the way CUDA's "
         "allocator does (PyTorch installs the Python side at import)",
         header("torch/csrc/profiler/combined_traceback.h",
                "struct TORCH_API CapturedTraceback : public c10::GatheredContext",
                "static std::shared_ptr<CapturedTraceback> gather("),
         symbols=("_ZN5torch17CapturedTraceback6gatherEbbb",),
         covers=("torch::CapturedTraceback",)),
    _cpp("torch::py_symbolize", ("ProfilerBindings.cpp",),
         "turns the recorded stacks into the frame dicts (filename, line, name) CUDA's snapshots "
         "hold, which memory_viz reads",
         header("torch/csrc/profiler/python/combined_traceback.h",
                "TORCH_API std::vector<pybind11::object> py_symbolize("),
         symbols=("_ZN5torch12py_symbolizeERSt6vectorIPNS_17CapturedTracebackESaIS2_EE",)),
    _cpp("at::native::fill_stub", ("Fill.cpp",),
         "fill_/zero_ run the CPU's fill kernel on neuron memory",
         header("ATen/native/Fill.h", "fill_stub"),
         symbols=("_ZN2at6native9fill_stubE", *_stub_members(_FILL_STUB))),
    _cpp("at::native::copy_stub", ("Memory.cpp",),
         "a strided copy within one neuron device runs the CPU's copy kernel (with its dtype "
         "conversions) on a TensorIterator over neuron memory",
         header("ATen/native/Copy.h", "copy_stub"),
         symbols=("_ZN2at6native9copy_stubE", *_stub_members(_COPY_STUB))),
    _cpp("at::native::fill_empty_deterministic_", ("Memory.cpp",),
         "empty/empty_strided on neuron fill new memory as the CPU's do under "
         "torch.use_deterministic_algorithms(True) (an inline helper in a native header)",
         header("ATen/native/TensorFactories.h", "inline Tensor& fill_empty_deterministic_(")),
    _cpp("at::native sparse kernels SparseCPU and SparseCUDA share", ("Sparse.cpp",),
         "sparse neuron tensors register PyTorch's device-generic sparse constructors and "
         "accessors (the functions the CPU and CUDA sparse keys both dispatch to), so that "
         "they build neuron tensors and return views of the neuron members",
         _sparse_kernels_shared_with_cuda(_SPARSE_SHARED_KERNELS),
         symbols=(
             "_ZN2at6native11_nnz_sparseERKNS_6TensorE",
             "_ZN2at6native12copy_sparse_ERNS_6TensorERKS1_b",
             "_ZN2at6native12empty_sparseEN3c108ArrayRefIlEESt8optionalINS1_10ScalarTypeEES4_IN"
             "S1_6LayoutEES4_INS1_6DeviceEES4_IbES4_INS1_12MemoryFormatEE",
             "_ZN2at6native13values_sparseERKNS_6TensorE",
             "_ZN2at6native14_values_sparseERKNS_6TensorE",
             "_ZN2at6native14indices_sparseERKNS_6TensorE",
             "_ZN2at6native14sparse_resize_ERKNS_6TensorEN3c108ArrayRefIlEEll",
             "_ZN2at6native15_indices_sparseERKNS_6TensorE",
             "_ZN2at6native15_nnz_sparse_csrERKNS_6TensorE",
             "_ZN2at6native16dense_dim_sparseERKNS_6TensorE",
             "_ZN2at6native17sparse_dim_sparseERKNS_6TensorE",
             "_ZN2at6native17values_sparse_csrERKNS_6TensorE",
             "_ZN2at6native18_coalesced_sparse_ERNS_6TensorEb",
             "_ZN2at6native19is_coalesced_sparseERKNS_6TensorE",
             "_ZN2at6native20copy_sparse_wrapper_ERNS_6TensorERKS1_b",
             "_ZN2at6native20dense_dim_sparse_csrERKNS_6TensorE",
             "_ZN2at6native20new_with_dims_sparseEllN3c108ArrayRefIlEESt8optionalINS1_10ScalarT"
             "ypeEES4_INS1_6LayoutEES4_INS1_6DeviceEES4_IbE",
             "_ZN2at6native21empty_like_sparse_cooERKNS_6TensorESt8optionalIN3c1010ScalarTypeEE"
             "S4_INS5_6LayoutEES4_INS5_6DeviceEES4_IbES4_INS5_12MemoryFormatEE",
             "_ZN2at6native21empty_like_sparse_csrERKNS_6TensorESt8optionalIN3c1010ScalarTypeEE"
             "S4_INS5_6LayoutEES4_INS5_6DeviceEES4_IbES4_INS5_12MemoryFormatEE",
             "_ZN2at6native21sparse_dim_sparse_csrERKNS_6TensorE",
             "_ZN2at6native22col_indices_sparse_csrERKNS_6TensorE",
             "_ZN2at6native22row_indices_sparse_csrERKNS_6TensorE",
             "_ZN2at6native23ccol_indices_sparse_csrERKNS_6TensorE",
             "_ZN2at6native23copy_sparse_compressed_ERNS_6TensorERKS1_b",
             "_ZN2at6native23crow_indices_sparse_csrERKNS_6TensorE",
             "_ZN2at6native23empty_sparse_compressedEN3c108ArrayRefIlEESt8optionalINS1_10Scalar"
             "TypeEES4_INS1_6LayoutEES4_INS1_6DeviceEES4_IbES4_INS1_12MemoryFormatEE",
             "_ZN2at6native24sparse_resize_and_clear_ERKNS_6TensorEN3c108ArrayRefIlEEll",
             "_ZN2at6native38new_with_dims_and_tensor_sparse_symintEllN3c108ArrayRefINS1_6SymIn"
             "tEEERKNS_6TensorES7_St8optionalINS1_10ScalarTypeEES8_INS1_6LayoutEES8_INS1_6Devic"
             "eEES8_IbESF_"),
         covers=tuple(f"at::native::{kernel}" for _, _, kernel in _SPARSE_SHARED_KERNELS)),
    _cpp("SparseTensorImpl / SparseCsrTensorImpl built and re-pointed by hand",
         ("SparseMembers.cpp",),
         "a sparse tensor crosses between neuron and its CPU alias by rebuilding its TensorImpl "
         "over mapped members, and in-place sparse kernels' new members are set back the same way",
         header("ATen/SparseTensorImpl.h", "void raw_resize_(", "void set_indices_and_values_unsafe(",
                "void set_coalesced(", "explicit SparseTensorImpl("),
         header("ATen/SparseCsrTensorImpl.h", "void set_member_tensors(", "void set_layout(",
                "explicit SparseCsrTensorImpl("),
         covers=("at::detail::make_tensor",)),
    _cpp("at::native::_fused_sdp_choice_stub (REGISTER_PRIVATEUSE1_DISPATCH)",
         ("Attention.cpp",),
         "SDPA asks this stub which fused kernel to use; neuron answers what the CPU answers",
         header("ATen/native/transformers/attention.h", "_fused_sdp_choice_stub"),
         header("ATen/native/DispatchStub.h", "REGISTER_PRIVATEUSE1_DISPATCH"),
         symbols=("_ZN2at6native22_fused_sdp_choice_stubE",),
         covers=("at::native::_fused_sdp_choice_stub",)),
    _cpp("at::cpu:: view, as_strided, _reshape_alias, resize_, set_ on neuron tensors",
         ("Memory.cpp",),
         "the CPU's metadata kernels are device-blind, so neuron's views and resizes are theirs",
         symbols=(
             "_ZN2at3cpu11set__symintERNS_6TensorEN3c107StorageENS3_6SymIntENS3_8ArrayRefIS5_EES7_",
             "_ZN2at3cpu11view_symintERKNS_6TensorEN3c108ArrayRefINS4_6SymIntEEE",
             "_ZN2at3cpu14resize__symintERKNS_6TensorEN3c108ArrayRefINS4_6SymIntEEESt8optionalINS4_"
             "12MemoryFormatEE",
             "_ZN2at3cpu17as_strided_symintERKNS_6TensorEN3c108ArrayRefINS4_6SymIntEEES7_St8optiona"
             "lIS6_E",
             "_ZN2at3cpu21_reshape_alias_symintERKNS_6TensorEN3c108ArrayRefINS4_6SymIntEEES7_"),
         covers=("at::cpu::as_strided_symint", "at::cpu::view_symint",
                 "at::cpu::_reshape_alias_symint", "at::cpu::resize__symint",
                 "at::cpu::set__symint")),
    _cpp("at::detail::empty_generic / empty_strided_generic / empty_cpu",
         ("Memory.cpp", "CompileAllocation.cpp", "Arithmetic.cpp", "ZeroTensors.cpp"),
         "neuron tensors are allocated with ATen's generic empty on the neuron allocator",
         symbols=(
             "_ZN2at6detail13empty_genericEN3c108ArrayRefIlEEPNS1_9AllocatorENS1_14DispatchKeySetEN"
             "S1_10ScalarTypeESt8optionalINS1_12MemoryFormatEE",
             "_ZN2at6detail21empty_strided_genericEN3c108ArrayRefIlEES3_PNS1_9AllocatorENS1_14Dispa"
             "tchKeySetENS1_10ScalarTypeE",
             "_ZN2at6detail9empty_cpuEN3c108ArrayRefIlEENS1_10ScalarTypeEbSt8optionalINS1_12MemoryF"
             "ormatEE"),
         covers=("at::detail::empty_generic", "at::detail::empty_strided_generic",
                 "at::detail::empty_cpu")),
    _cpp("c10::SetAllocator(kCPU, ..., priority): the kernel-scope CPU allocator",
         ("KernelScope.cpp",),
         "while a CPU kernel runs for a neuron op, its CPU allocations come from neuron memory",
         header("c10/core/Allocator.h", "SetAllocator(", "uint8_t priority"),
         symbols=("_ZN3c1012SetAllocatorENS_10DeviceTypeEPNS_9AllocatorEh",),
         covers=("c10::SetAllocator",)),
    _cpp("at::detail::getDefaultCPUGenerator", ("NeuronGenerator.cpp",),
         "NEURON_RNG=cpu: random ops on neuron draw from the CPU's default generator itself, so "
         "a seeded port equals the CPU run bit for bit",
         header("ATen/CPUGeneratorImpl.h", "TORCH_API const Generator& getDefaultCPUGenerator();"),
         symbols=("_ZN2at6detail22getDefaultCPUGeneratorEv",),
         covers=("at::detail::getDefaultCPUGenerator",)),
    _cpp("at::CPUGeneratorImpl::set_engine and mt19937 internals",
         ("NeuronGenerator.cpp", "NeuronGenerator.h"),
         "random ops run CPU kernels on a CPU generator whose mt19937 state is derived from "
         "the neuron generator's Philox (seed, offset)",
         header("ATen/core/MT19937RNGEngine.h", "struct mt19937_data_pod", "uint64_t seed_;",
                "int left_;", "bool seeded_;", "uint32_t next_;", "state_;", "set_data("),
         header("ATen/core/PhiloxRNGEngine.h", "Philox4_32"),
         symbols=("_ZN2at16CPUGeneratorImpl10set_engineENS_14mt19937_engineE",
                  "_ZN2at16CPUGeneratorImpl28set_next_float_normal_sampleESt8optionalIfE",
                  "_ZN2at16CPUGeneratorImpl29set_next_double_normal_sampleESt8optionalIdE",
                  "_ZN2at16CPUGeneratorImplC1Em"),
         covers=("at::CPUGeneratorImpl", "at::mt19937_data_pod", "at::Philox4_32")),
    _cpp("TensorImpl/StorageImpl internals of the CPU alias",
         ("CpuAlias.cpp", "NeuronHooks.cpp", "Arithmetic.cpp", "Fallback.cpp",
          "SharedStorage.cpp", "DeferredOp.cpp", "CallArguments.cpp", "HeldChain.cpp",
          "Accounting.cpp"),
         "CPU aliases of neuron memory are built and synced back by hand: sizes/strides set "
         "directly, storage data pointers swapped, conj/neg bits copied; a storage sent to "
         "another process has its data pointer swapped for shareable memory",
         header("c10/core/TensorImpl.h", "void set_sizes_and_strides(",
                "void set_storage_keep_dtype(", "bool is_wrapped_number() const"),
         header("c10/core/StorageImpl.h", "set_data_ptr_noswap(", "at::DataPtr set_data_ptr(",
                "void set_nbytes("),
         header("c10/core/Allocator.h", "void unsafe_set_device("),
         header("ATen/core/TensorBase.h", "_set_conj(", "_set_neg("),
         covers=("at::detail::make_tensor", "TensorImpl::set_sizes_and_strides",
                 "TensorImpl::set_storage_keep_dtype", "TensorImpl::is_wrapped_number",
                 "StorageImpl::set_data_ptr_noswap", "StorageImpl::set_data_ptr",
                 "StorageImpl::set_nbytes",
                 "DataPtr::unsafe_set_device", "Tensor::_set_conj", "Tensor::_set_neg")),
    _cpp("c10::impl::PyObjectSlot (PyObject preservation)", ("ChainSignature.cpp",),
         "fused eager skips writing a held op's result that nothing can read: a tensor whose "
         "Python object only C++ references keep alive (the object holds one strong reference "
         "to its TensorImpl or StorageImpl) is not held by Python code",
         header("c10/core/impl/PyObjectSlot.h", "PyObject* load_pyobj() const"),
         header("c10/util/intrusive_ptr.h", "Note [PyObject preservation for Tensor and Storages]",
                "The PyObject, if it exists, holds a strong reference"),
         covers=("c10::impl::PyObjectSlot", "pyobj_slot", "load_pyobj")),
    _cpp("torch::jit::toPyObject, torch::getTHPDtype", ("FusedEagerBindings.cpp",),
         "a hot chain's constants (IValues of the dispatcher's stack) reach the compile thread "
         "as Python values, a dtype argument as a torch.dtype",
         header("torch/csrc/jit/python/pybind_utils.h", "toPyObject("),
         header("torch/csrc/DynamicTypes.h", "getTHPDtype("),
         covers=("toPyObject", "getTHPDtype")),
    _cpp("at::detail::computeStorageNbytesContiguous", ("Memory.cpp",),
         "resize_ waits for the queue only when the new size needs more bytes than the storage "
         "has (the bytes a contiguous tensor of those sizes spans)",
         header("ATen/EmptyTensor.h", "TORCH_API size_t computeStorageNbytesContiguous("),
         symbols=("_ZN2at6detail30computeStorageNbytesContiguousEN3c108ArrayRefIlEEmm",)),
    _cpp("at::internal::GRAIN_SIZE", ("Fill.cpp",),
         "zero_ takes the CPU's memset shortcut below the CPU's parallel grain size",
         header("ATen/TensorIterator.h", "constexpr int64_t GRAIN_SIZE")),
    Internal(
        "at::_ops::<op>::redispatch to the CPU key", "relied on",
        ("Matmul.cpp", "Attention.cpp", "Memory.cpp", "Fill.cpp", "DeferredOp.cpp",
         "CapturedCall.cpp"),
        "mm/addmm/bmm and SDPA's kernel choice run the CPU kernel on the neuron tensors "
        "themselves (the CPU kernels check shapes and dtypes, not devices); copies and "
        "one-element fills run the CPU's copy_/fill_ on CPU aliases; a queued op whose CPU "
        "kernel put its result elsewhere copies it into the memory the caller got",
        _all(header("ATen/ops/mm_ops.h", "struct TORCH_API mm_out", "redispatch("),
             header("ATen/ops/addmm_ops.h", "struct TORCH_API addmm_out"),
             header("ATen/ops/bmm_ops.h", "struct TORCH_API bmm_out"),
             header("ATen/ops/_fused_sdp_choice_ops.h", "struct TORCH_API _fused_sdp_choice"),
             header("ATen/ops/copy_ops.h", "struct TORCH_API copy_ "),
             header("ATen/ops/fill_ops.h", "struct TORCH_API fill__Scalar "),
             header("ATen/ops/resize_ops.h", "struct TORCH_API resize_ ")),
        covers=("at::_ops::mm_out::redispatch", "at::_ops::addmm_out::redispatch",
                "at::_ops::bmm_out::redispatch", "at::_ops::_fused_sdp_choice::redispatch",
                "at::_ops::copy_::redispatch", "at::_ops::fill__Scalar::redispatch",
                "at::_ops::resize_::redispatch")),
    Internal(
        "c10::Dispatcher op introspection (getAllOpNames, hasKernelForDispatchKey)", "relied on",
        ("OpWalk.h", "Fallback.cpp", "HostKernels.cpp"),
        "route_to_cpu_kernels finds, at import, the ops the dispatcher would decompose for "
        "neuron although the CPU has a kernel; guard_host_kernels finds an extension's "
        "catch-all-only ops",
        header("ATen/core/dispatch/Dispatcher.h", "getAllOpNames()",
               "bool hasKernelForDispatchKey(DispatchKey k) const"),
        covers=("Dispatcher::getAllOpNames", "Dispatcher::hasKernelForDispatchKey")),
    Internal(
        "missing-kernel error text 'Could not run ...'", "relied on", ("Fallback.cpp",),
        "the fallback turns 'no CPU kernel' into a neuron NotImplementedError by this prefix",
        _missing_kernel_says_could_not_run, covers=("Could not run",)),
    Internal(
        "AutocastPrivateUse1 op-list macros (AT_FORALL_*, KERNEL_PRIVATEUSEONE)", "relied on",
        ("Autocast.cpp",),
        "neuron's autocast lists are CUDA's, expanded from ATen's shared macros",
        header("ATen/autocast_mode.h", "AT_FORALL_LOWER_PRECISION_FP", "AT_FORALL_FP32",
               "AT_FORALL_FP32_SET_OPT_DTYPE", "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE",
               "AT_FORALL_PROMOTE", "KERNEL_PRIVATEUSEONE",
               "KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE"),
        covers=("AT_FORALL", "KERNEL_PRIVATEUSEONE")),
    Internal(
        "c10::DeviceAllocator / c10::CachingDeviceAllocator::DeviceStats", "relied on",
        ("NeuronAllocator.h", "NeuronAllocator.cpp"),
        "torch.accelerator.memory_* and the profiler see an allocator derived from it",
        header("c10/core/CachingDeviceAllocator.h", "struct C10_API DeviceAllocator",
               "struct DeviceStats", "getDeviceStats(", "resetPeakStats(", "getMemoryInfo("),
        covers=("c10::DeviceAllocator", "CachingDeviceAllocator::DeviceStats")),
    _cpp("c10d::Timer and c10d::TimerRegistry (DDP's runtime statistics)", ("ReducerTimer.cpp",),
         "DDP's Reducer asks c10d's TimerRegistry for a timer of the module's device type; "
         "without one registered for PrivateUse1 a neuron module warns on every rank that "
         "time stats are only for CPU and CUDA",
         header("torch/csrc/distributed/c10d/reducer_timer.hpp", "class TORCH_API Timer",
                "virtual void record(Event event)",
                "virtual std::optional<int64_t> measureDifference(Event start, Event end) = 0",
                "TimerRegistry"),
         symbols=("_ZN4c10d13TimerRegistryEv",),
         covers=("c10d::Timer", "c10d::TimerRegistry")),
    _cpp("c10d::Work (subclassed)", ("DistWork.cpp",),
         "NeuronWork and DeferredWork are c10d Works handed back to torch.distributed",
         header("torch/csrc/distributed/c10d/Work.hpp", "class TORCH_API Work",
                "void finish(std::exception_ptr exception = nullptr)"),
         symbols=("_ZN4c10d4WorkC2EiNS_6OpTypeEPKcRKSt8optionalISt6vectorIN2at6TensorESaIS7_EEE",
                  "_ZN4c10d4Work6finishENSt15__exception_ptr13exception_ptrE",
                  "_ZN4c10d4WorkD2Ev", "_ZTIN4c10d4WorkE", *_WORK_VIRTUALS),
         covers=("c10d::Work", "c10d::OpType")),
    Internal(
        "c10d::ReduceOp::supplement_ / PreMulSumSupplement", "relied on",
        ("DistReduceOp.cpp", _DIRECT),
        "PREMUL_SUM's factor lives in the ReduceOp's C++ supplement; gloo lacks the op, so "
        "neuron runs it as a SUM of scaled inputs",
        _all(header("torch/csrc/distributed/c10d/Types.hpp", "supplement_",
                    "struct PreMulSumSupplement : _SupplementBase", "double_factor",
                    "tensor_factor"),
             _premul_sum_is_a_reduce_op),
        covers=("c10d::ReduceOp", "c10d::PreMulSumSupplement")),
    _cpp("torch/csrc Python glue (THPVariable_Wrap/Check/Unpack, THPDtype, python_error)",
         ("CompileAllocation.cpp", "KernelLaunch.cpp", "RuntimeBindings.cpp"),
         "empty_strided_neuron and launch_neuron are bare CPython functions for the compiled "
         "wrapper's speed",
         header("torch/csrc/Dtype.h", "THPDtype_Check", "scalar_type"),
         header("torch/csrc/autograd/python_variable.h", "THPVariable_Check",
                "THPVariable_Unpack"),
         symbols=("_Z16THPVariable_WrapON2at10TensorBaseE", "THPDtypeType"),
         covers=("THPVariable_Wrap", "THPDtype_Check", "THPVariable_Check", "THPVariable_Unpack",
                 "python_error")),
    Internal(
        "at::native::ZeroTensorAllocator", "relied on", ("ZeroTensors.cpp",),
        "neuron builds autograd's efficient zero tensors itself, keeping the ZeroTensor key",
        header("ATen/native/TensorFactories.h", "struct ZeroTensorAllocator"),
        covers=("at::native::ZeroTensorAllocator",)),
    Internal(
        "aten::_has_compatible_shallow_copy_type (read by Module._apply)", "relied on",
        ("ShallowCopy.cpp",),
        "Module.to('neuron') keeps Parameter objects (tied weights) only when this answers "
        "true for CPU -> neuron; ATen's own answer omits PrivateUse1",
        contains("torch.nn.modules.module", "Module._apply",
                 "torch._has_compatible_shallow_copy_type(")),
    Internal(
        "Conjugate/Negative fallbacks materialize through _copy_from", "relied on",
        ("MathBitCopies.cpp",),
        "without a fallthrough for _copy_from, x.conj().cpu() recursed forever on neuron",
        _conj_view_copies_to_host),
    Internal(
        "aten::_thnn_fused_lstm_cell / _thnn_fused_gru_cell (CUDA-only, picked for "
        "PrivateUse1)", "relied on", ("RnnCells.cpp",),
        "nn.LSTM/GRU on any non-CPU device run their cells through these; neuron implements "
        "them",
        _thnn_fused_cells_exist),
    # ---- the profiler (csrc/profiler, torchneuron/profiler, torchneuron/device/_memory_history.py)
    _cpp("torch::profiler::impl::PrivateUse1ProfilerRegistry", ("NeuronActivityProfiler.cpp",),
         "PyTorch 2.13's extension point for a PrivateUse1 profiler: the factory of our Kineto "
         "IActivityProfiler; its header is declared again in NeuronActivityProfiler.cpp because "
         "it includes Kineto's headers by bare names outside an extension's include path",
         header("torch/csrc/profiler/standalone/privateuse1_profiler.h",
                "static PrivateUse1ProfilerRegistry& instance();",
                "void registerFactory(PrivateUse1ProfilerFactory factory);",
                "std::function<std::unique_ptr<libkineto::IActivityProfiler>()>;"),
         exports("_ZN5torch8profiler4impl27PrivateUse1ProfilerRegistry8instanceEv",
                 "_ZN5torch8profiler4impl27PrivateUse1ProfilerRegistry15registerFactoryESt8"
                 "functionIFSt10unique_ptrIN9libkineto17IActivityProfilerESt14default_deleteI"
                 "S6_EEvEE"),
         covers=("torch::profiler::impl::PrivateUse1ProfilerRegistry",
                 "torch::profiler::impl::PrivateUse1ProfilerFactory")),
    _cpp("libkineto::IActivityProfiler, IActivityProfilerSession, GenericTraceActivity",
         ("NeuronActivityProfiler.cpp",),
         "the device activities reach torch.profiler as Kineto activities of a child session: "
         "CONCURRENT_KERNEL (device time) and GPU_USER_ANNOTATION (nvtx ranges), linked to the "
         "CPU op by the correlation id Kineto pushes on the op's thread",
         header("kineto/IActivityProfiler.h", "class IActivityProfilerSession",
                "virtual void pushCorrelationId(", "getLinkedActivityCallback",
                "virtual std::unique_ptr<CpuTraceBuffer> getTraceBuffer() = 0;"),
         header("kineto/libkineto.h", "struct CpuTraceBuffer"),
         header("kineto/ActivityType.h", "CONCURRENT_KERNEL = 5", "GPU_USER_ANNOTATION = 2"),
         exports("_ZNK9libkineto20GenericTraceActivity3logERNS_14ActivityLoggerE"),
         covers=("libkineto::IActivityProfiler", "libkineto::IActivityProfilerSession",
                 "libkineto::GenericTraceActivity", "libkineto::CpuTraceBuffer",
                 "libkineto::ActivityType", "libkineto::ActivityLogger", "libkineto::TraceSpan",
                 "libkineto::TraceStatus", "libkineto::DeviceInfo", "libkineto::ResourceInfo",
                 "libkineto::ITraceActivity", "libkineto::Config",
                 "libkineto::getLinkedActivityCallback")),
    Internal(
        "torch.cuda._memory_viz snapshot format", "relied on",
        ("torchneuron/device/_memory_history.py",),
        "torch.neuron.memory._snapshot() is built in the structure PyTorch's memory viewers "
        "read (segments with blocks, device_traces with these actions), so they draw it",
        _all(exists("torch.cuda._memory_viz.trace_plot"),
             exists("torch.cuda._memory_viz.segment_plot"),
             contains("torch.cuda._memory_viz", None, "device_traces", "free_completed",
                      "segment_alloc", "active_allocated", "total_size"))),
    # ---- the kernel library (torchneuron/kernels/library)
    Internal(
        "aten._scaled_dot_product_flash_attention_for_cpu", "relied on",
        ("torchneuron/kernels/library/attention.py",),
        "the attention op's fast path runs the CPU's flash attention forward and backward on "
        "neuron memory (memory linear in the sequence, logsumexp kept for the backward), which "
        "a custom op's backward cannot reach through scaled_dot_product_attention",
        _cpu_flash_attention_ops_as_checked,
        covers=("torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
                "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward")),
    # ---- libraries above torch (torchneuron/ecosystem/)
    Internal(
        "transformers.pipelines.base.Pipeline.__init__", "patched",
        ("torchneuron/ecosystem/transformers_pipeline.py",),
        "an integer pipeline device (0 when none is given, or a device map's first entry) "
        "becomes cuda/npu/xpu:N or the CPU, never neuron:N: without the wrapper pipelines ran "
        "on the CPU without a word (checked with transformers 5.24.0)",
        _transformers_pipeline_maps_integers_without_neuron),
    Internal(
        "transformers.cli.serving (serve's handlers)", "patched",
        ("torchneuron/ecosystem/transformers_serve.py",),
        "transformers serve's app shutdown never stops the continuous-batching thread (not a "
        "daemon), so Ctrl-C left the process waiting for it forever, and it generated for "
        "max_tokens below 1 and past the model's context where vLLM answers 400 (checked with "
        "transformers 5.24.0)",
        _transformers_serve_handlers_as_wrapped,
        covers=("transformers.cli.serving.server.build_server",
                "transformers.cli.serving.utils.BaseHandler._validate_request",
                "transformers.cli.serving.utils.GenerateManager.generate_streaming",
                "transformers.cli.serving.utils.CBGenerateManager.generate_streaming")),
    # ---- the op-support table (torchneuron/ops/op_support.py)
    Internal(
        "torch._C._dispatch_get_all_op_names", "relied on", (_OP_SUPPORT,),
        "the op-support table enumerates every operator the dispatcher has; OpOverloadPackets "
        "also list TorchScript builtins that are no dispatcher ops",
        _dispatcher_lists_its_ops),
    Internal(
        "torch._C._dispatch_has_kernel_for_dispatch_key", "relied on", (_OP_SUPPORT,),
        "the op-support table asks which dispatch keys have a kernel for an op (CPU: the boxed "
        "fallback runs it; CompositeImplicitAutograd: it decomposes; QuantizedCPU, SparseCPU)",
        _dispatcher_answers_kernel_questions),
    Internal(
        "torch._decomp.core_aten_decompositions", "relied on", (_OP_SUPPORT,),
        "the op-support rule counts an op native when PyTorch decomposes it into the core ATen "
        "opset",
        _all(exists("torch._decomp.core_aten_decompositions", params=()),
             _core_decompositions_are_op_overloads)),
    Internal(
        "torch._decomp.decomposition_table", "relied on", (_OP_SUPPORT,),
        "the op-support rule counts an op native when PyTorch's decomposition registry "
        "decomposes it (into core ATen or prims, which a compiler lowers)",
        exists("torch._decomp.decomposition_table", of_type=dict)),
    Internal(
        "torch._C._VariableFunctions", "relied on", (_OP_SUPPORT,),
        "the op-support table names the Python namespace of an ATen op by the binding module "
        "that has it (torch._C._nn is torch.nn.functional's, _linalg torch.linalg's, ...)",
        _all(*(exists(f"torch._C.{m}", members=(name,)) for m, name in (
            ("_VariableFunctions", "add"), ("_nn", "gelu"), ("_linalg", "linalg_vector_norm"),
            ("_special", "special_erfcx"), ("_fft", "fft_fft"), ("_sparse", "sparse_sampled_addmm"),
            ("_nested", "nested_to_padded_tensor")))),
        covers=("torch._C._nn", "torch._C._linalg", "torch._C._special", "torch._C._fft",
                "torch._C._sparse", "torch._C._nested", "torch._C.?")),
    Internal(
        "at::get_num_threads (per-thread OpenMP)", "relied on",
        ("torchneuron/kernels/nki/host_threads.py",),
        "the NKI simulator runs a kernel with its own thread's OpenMP team size set to one "
        "(tiles sit just above ATen's grain, and a team per instruction waits for busy cores); "
        "this holds only while ATen's intra-op count is OpenMP's per-thread setting",
        _intra_op_threads_are_per_thread_openmp),
)


def by_name(name: str) -> Internal:
    for entry in ENTRIES:
        if entry.name == name:
            return entry
    raise KeyError(f"no torch internal named {name!r} in torchneuron.runtime.torch_internals")


def cited(text: str) -> Internal:
    """The entry a `# internal: see runtime/torch_internals.py "<text>"` comment points to: its
    name, or the unique dotted tail of one ("GradScaler.unscale_")."""
    found = [e for e in ENTRIES if e.name == text or e.name.endswith("." + text)]
    if len(found) != 1:
        raise KeyError(f"{text!r} names {len(found)} entries of torch_internals, not one")
    return found[0]


def verify_all() -> list[InternalChanged]:
    """Every entry's check; returns the failures (empty: all hold on this torch)."""
    failures = []
    for entry in ENTRIES:
        try:
            entry.verify()
        except InternalChanged as e:
            failures.append(e)
    return failures
