"""Which ATen ops a Trainium runtime would run natively, on the host, or not at all, classified as
AWS's TorchNeuron classifies its API: **native**, **host fallback** (its CPU_FALLBACK: "the
model runs; the operation is slower") or **unsupported**, and which source decided. Where AWS
lists an op (op_support_aws.py) its class stands, with the document and version; for everything
else one rule, below, decides. `classify` is what the readiness accounting asks per op call:
the first call for an (op, dtype, layout) works it out, every later call is a cache hit.
`torchneuron op-support` writes the whole table into docs/op-support.md (op_support_page.py).

The rule, first match deciding (`RULE` says the same in words, for the page). An in-place
variant ("aten::add_"), a foreach form ("aten::_foreach_add_"), a backend hook
("aten::convolution_overrideable") or a backward ("aten::upsample_nearest2d_backward") takes the
class of the op it applies, by the rule.
1. no kernel the neuron device can run (CUDA-, MPS-, cuDNN-, MKLDNN- or nested-only): out of the
   table; `classify` answers unsupported.
2. quantized: an op with only a quantized kernel, or one that makes quantized tensors:
   unsupported (AWS's `N` covers quantized operator variants; torchneuron refuses quantized
   tensors by name).
3. a sparse layout (COO, CSR, CSC, BSR, BSC), or an op that exists only for sparse tensors:
   host fallback.
4. float64 or complex128 arithmetic (Trainium has neither): host fallback for that dtype; ops
   with no arithmetic stay native: those that only move, view, fill or compare bits
   (op_lists.FLOAT64_DATA_MOVEMENT_OPS, the list the float64 policy uses at run time), views and
   view copies (torch.Tag.view_copy), and memory work (op_lists.MEMORY_OPS).
5. AWS lists the op: AWS's class.
6. a data-dependent output shape (torch.Tag.dynamic_output_shape: nonzero, masked_select,
   unique...): host fallback.
7. native when the op has a lowering: in PyTorch's core ATen opset (torch.Tag.core), a result
   that only reads the device (torch.Tag.data_dependent_output: `.item()`, `equal`; a host sync,
   not a fallback), a decomposition (CompositeImplicitAutograd, or torch._decomp's core-ATen
   table), no arithmetic at all (as in 4), or no tensor result and none written (asserts,
   predicates), or a random op (torch.Tag.nondeterministic_seeded: the device has its own
   generator); torch._decomp's table counts with its prims decompositions, which a compiler
   lowers.
8. anything else (no core-ATen lowering and no decomposition into one): host fallback."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from . import op_support_aws as aws
from .op_lists import FLOAT64_DATA_MOVEMENT_OPS, MEMORY_OPS

NATIVE, HOST_FALLBACK, UNSUPPORTED = "native", "host fallback", "unsupported"
CLASSES = (NATIVE, HOST_FALLBACK, UNSUPPORTED)
SOURCES = ("aws", "rule")

RULE = (
    "quantized ops are unsupported (AWS's `N` covers quantized operator variants); sparse "
    "layouts and sparse-only ops are host fallbacks; float64 and complex128 arithmetic is a "
    "host fallback for those dtypes (ops with no arithmetic excepted: data movement, views, "
    "memory); "
    "where AWS lists the op, AWS's class; an op with a data-dependent output shape "
    "(`torch.Tag.dynamic_output_shape`) is a host fallback; an op is native when it is in "
    "PyTorch's core ATen opset (`torch.Tag.core`), only reads a value back "
    "(`torch.Tag.data_dependent_output`, a host sync), decomposes (CompositeImplicitAutograd or "
    "PyTorch's decomposition tables, into core ATen or prims), does no arithmetic, returns and "
    "writes no tensor (asserts, predicates), or draws random numbers "
    "(`torch.Tag.nondeterministic_seeded`: the device has its own generator); anything else, "
    "with no core-ATen lowering and no decomposition, is a host fallback")

HOST_DTYPES = (torch.float64, torch.complex128)
SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr,
                  torch.sparse_bsc)

# Dispatch keys whose kernel runs for a neuron tensor: torchneuron's own, the boxed fallback's
# CPU kernel, PyTorch's composites, and the sparse fallbacks (csrc/aten/native/Sparse.cpp).
_DENSE_KEYS = ("PrivateUse1", "CPU", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
               "CompositeExplicitAutogradNonFunctional")
_SPARSE_KEYS = ("SparsePrivateUse1", "SparseCsrPrivateUse1", "SparseCPU", "SparseCsrCPU")
_QUANTIZED_KEYS = ("QuantizedCPU",)
# Ops that make quantized tensors from dense ones (their kernel is a CPU one).
_MAKES_QUANTIZED = re.compile(r"(quantize_per_\w+|_make_per_\w+_quantized_tensor|"
                              r"_?empty_\w*quantized|quantized_\w+)")
# Python namespaces an ATen op is bound in, most specific first (torch._C's binding modules).
_PYTHON_MODULES = (("_nn", "torch.nn.functional"), ("_linalg", "torch.linalg"),
                   ("_special", "torch.special"), ("_fft", "torch.fft"),
                   ("_sparse", "torch.sparse"), ("_nested", "torch.nested"),
                   ("_VariableFunctions", "torch"))


@dataclass(frozen=True)
class OpSupport:
    """One answer: `category` (native / host fallback / unsupported), `source` ("aws" or
    "rule"), `reason` in words; `url` and `version` name AWS's document where AWS decided.
    Unpacks as (category, source, reason)."""

    category: str
    source: str
    reason: str
    url: str = ""
    version: str = ""

    def __iter__(self):
        return iter((self.category, self.source, self.reason))


@dataclass(frozen=True)
class _Facts:
    """What PyTorch says about an op packet, over all its overloads."""

    packet: str
    runs: bool  # some overload has a kernel the neuron device runs
    quantized: bool
    sparse_only: bool
    moves_bits: bool  # no arithmetic: views, view copies, data movement, memory
    no_tensor: bool  # returns no tensor and writes none (asserts, predicates, metadata)
    dynamic_shape: bool
    reads_value: bool
    core: bool
    composite: bool
    decomposes: bool
    random: bool  # draws random numbers (torch.Tag.nondeterministic_seeded)
    decomposes_to_prims: bool  # in torch._decomp's whole registry (core ATen or prims)
    kernels: tuple[str, ...]  # the dispatch keys with a kernel, for the unsupported's reason


def packet_of(op) -> str:
    """"aten::add" for "aten::add.Tensor", "aten.add.Tensor", "aten::add", an OpOverload or an
    OpOverloadPacket; ValueError for a name PyTorch's dispatcher does not know."""
    if callable(getattr(op, "overloads", None)):  # an OpOverloadPacket: str() is "aten.add"
        op = str(op)
    elif callable(getattr(op, "name", None)) and hasattr(op, "overloadpacket"):  # OpOverload
        op = op.name()
    if not isinstance(op, str):
        raise TypeError(f"op must be an op name such as 'aten::add.Tensor' or an OpOverload, "
                        f"not {type(op).__name__}")
    return _packet_of_name(op)


@functools.lru_cache(maxsize=None)
def _packet_of_name(name: str) -> str:
    namespace, sep, rest = name.partition("::")
    if not sep:
        namespace, sep, rest = name.partition(".")
    base, _, overload = rest.partition(".")
    overloads = _overloads(f"{namespace}::{base}") if sep and namespace and base else ()
    named = {o.name() for o in overloads}  # "aten::add.Tensor"; the default one "aten::nonzero"
    full = f"{namespace}::{base}" + ("" if overload in ("", "default") else f".{overload}")
    if not overloads or (overload and full not in named):
        raise ValueError(f"unknown op {name!r}: PyTorch's dispatcher has no such operator "
                         f"(expected a name such as 'aten::add' or 'aten::add.Tensor')")
    return f"{namespace}::{base}"


def classify(op, dtype: torch.dtype | None = None,
             layout: torch.layout = torch.strided) -> OpSupport:
    """How `op` ("aten::mul.Tensor", an OpOverload, ...) would run on Trainium for tensors of
    `dtype` (None: the op in general) and `layout`. Cached per (op, dtype, layout): a repeated
    question is one dict lookup, since the accounting asks it on every op call."""
    key = (op, dtype, layout)
    try:
        return _answers[key]
    except (KeyError, TypeError):  # TypeError: an unhashable op, refused below
        pass
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype or None, not {dtype!r}")
    if not isinstance(layout, torch.layout):
        raise TypeError(f"layout must be a torch.layout, not {layout!r}")
    answer = _answers[key] = _classify(packet_of(op), dtype, layout)
    return answer


_answers: dict[tuple, OpSupport] = {}


@functools.lru_cache(maxsize=None)
def _classify(packet: str, dtype: torch.dtype | None, layout: torch.layout) -> OpSupport:
    f = _facts(packet)
    base = _base_op(packet)
    if base and aws.listed(packet) is None and not f.moves_bits and f.runs \
            and not f.sparse_only and not f.quantized:
        # An in-place variant, a foreach op, a backend hook or a backward computes what its
        # base op computes (or its gradient); the rule decides (AWS named the base op).
        of = _classify(base, dtype, layout)
        return OpSupport(of.category, "rule",
                         f"{_variant(packet)} of {base} ({of.source}: {of.reason})")
    if not f.runs:
        return OpSupport(UNSUPPORTED, "rule", "no kernel the neuron device can run (kernels: "
                         f"{', '.join(f.kernels) or 'none'})")
    if f.quantized:
        return OpSupport(UNSUPPORTED, "rule", "quantized operator (AWS's N covers quantized "
                         "variants; torchneuron refuses quantized tensors)")
    if layout in SPARSE_LAYOUTS:
        return OpSupport(HOST_FALLBACK, "rule", f"sparse layout ({layout})")
    if f.sparse_only:
        return OpSupport(HOST_FALLBACK, "rule", "sparse-only op (sparse layouts)")
    if dtype in HOST_DTYPES and not f.moves_bits:
        return OpSupport(HOST_FALLBACK, "rule", f"{dtype} arithmetic (none on Trainium)")
    listed = aws.listed(packet)
    if listed:
        value, url, version = listed
        return OpSupport(aws.AWS_CLASSES[value], "aws", f"AWS lists it ({value})", url, version)
    if f.dynamic_shape:
        return OpSupport(HOST_FALLBACK, "rule", "data-dependent output shape "
                         "(torch.Tag.dynamic_output_shape)")
    if f.reads_value:
        return OpSupport(NATIVE, "rule", "reads a value back: a host sync, not a fallback "
                         "(torch.Tag.data_dependent_output)")
    if f.core:
        return OpSupport(NATIVE, "rule", "core ATen op (torch.Tag.core)")
    if f.composite:
        return OpSupport(NATIVE, "rule", "decomposes at dispatch (CompositeImplicitAutograd)")
    if f.decomposes:
        return OpSupport(NATIVE, "rule", "decomposes into core ATen (torch._decomp)")
    if f.moves_bits:
        return OpSupport(NATIVE, "rule", "no arithmetic (view, data movement or memory)")
    if f.no_tensor:
        return OpSupport(NATIVE, "rule", "no tensor result (an assert, predicate or metadata)")
    if f.random:
        return OpSupport(NATIVE, "rule", "draws random numbers on the device's own generator "
                         "(torch.Tag.nondeterministic_seeded)")
    if f.decomposes_to_prims:
        return OpSupport(NATIVE, "rule", "decomposes into core ATen and prims, which a "
                         "compiler lowers (torch._decomp's registry)")
    return OpSupport(HOST_FALLBACK, "rule", "no core-ATen lowering and no decomposition")


def _base_op(packet: str) -> str | None:
    """The op an in-place variant ("aten::add_" -> "aten::add"), a foreach op
    ("aten::_foreach_mul_" -> "aten::mul"), a backend hook ("aten::convolution_overrideable",
    which aten::convolution calls on neuron) or a backward ("aten::upsample_nearest2d_backward":
    the gradient kernel of an op a runtime runs natively) applies, where that op exists; else
    None."""
    namespace, name = packet.split("::", 1)
    if name.endswith("_overrideable"):
        name = name.removesuffix("_overrideable")
    elif name.endswith("_backward"):
        name = name.removesuffix("_backward")
    elif name.startswith("_foreach_"):
        name = name.removeprefix("_foreach_")
    elif not (name.endswith("_") and not name.endswith("__")):
        return None
    for candidate in (name.rstrip("_"), name):
        if candidate != packet.split("::", 1)[1] and _overloads(f"{namespace}::{candidate}"):
            return f"{namespace}::{candidate}"
    return None


def _variant(packet: str) -> str:
    if packet.endswith("_overrideable"):
        return "backend hook"
    if packet.endswith("_backward"):
        return "backward"
    return "foreach form" if "::_foreach_" in packet else "in-place variant"


def host_dtypes(op) -> str:
    """What runs on the host: for a native op "float64, complex128, sparse" (arithmetic) or
    "sparse" (an op that only moves bits); "every dtype" for a host fallback; "" for an
    unsupported op."""
    packet = packet_of(op)
    category = classify(packet).category
    if category != NATIVE:
        return "every dtype" if category == HOST_FALLBACK else ""
    arithmetic = [str(d).removeprefix("torch.") for d in HOST_DTYPES
                  if classify(packet, d).category == HOST_FALLBACK]
    return ", ".join([*arithmetic, "sparse"])


def device_ops(namespace: str = "aten") -> list[str]:
    """Every op packet of `namespace` the neuron device runs (a kernel it can use, quantized
    ones included since they are refused by name), sorted."""
    return sorted(p for p in _packets(namespace) if _facts(p).runs)


def not_run(namespace: str = "aten") -> list[str]:
    """The op packets of `namespace` the device has no kernel for (CUDA-only and the like)."""
    return sorted(p for p in _packets(namespace) if not _facts(p).runs)


def python_namespace(op) -> str:
    """Where Python users call the op: "torch", "torch.Tensor", "torch.nn.functional",
    "torch.linalg", ...; "internal" for a private name or one with no Python binding."""
    base = packet_of(op).split("::", 1)[1]
    if base.startswith("_"):
        return "internal"
    for module, namespace in _PYTHON_MODULES:
        # internal: see runtime/torch_internals.py "torch._C._VariableFunctions"
        if hasattr(getattr(torch._C, module), base):
            return namespace
    return "torch.Tensor" if hasattr(torch.Tensor, base) else "internal"


_MOVES_BITS = frozenset(FLOAT64_DATA_MOVEMENT_OPS)
_MEMORY = frozenset(MEMORY_OPS)


@functools.lru_cache(maxsize=1)
def _dispatcher_ops() -> frozenset[str]:
    """Every operator the dispatcher has ("aten::add.Tensor", "aten::nonzero"). TorchScript's
    builtins (aten::__and__.bool and the like) are overloads too, but not dispatcher ops."""
    # internal: see runtime/torch_internals.py "torch._C._dispatch_get_all_op_names"
    return frozenset(torch._C._dispatch_get_all_op_names())


@functools.lru_cache(maxsize=None)
def _packets(namespace: str) -> tuple[str, ...]:
    return tuple(sorted({n.split(".", 1)[0] for n in _dispatcher_ops()
                         if n.startswith(f"{namespace}::")}))


@functools.lru_cache(maxsize=None)
def _overloads(packet: str) -> tuple:
    """The packet's dispatcher overloads (OpOverloads)."""
    namespace, base = packet.split("::", 1)
    try:
        group = getattr(getattr(torch.ops, namespace), base)
        found = tuple(getattr(group, name) for name in group.overloads())
    except (AttributeError, RuntimeError):
        return ()
    return tuple(o for o in found if o.name() in _dispatcher_ops())


def _has_kernel(overload, key: str) -> bool:
    # internal: see runtime/torch_internals.py "torch._C._dispatch_has_kernel_for_dispatch_key"
    return torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), key)


@functools.lru_cache(maxsize=1)
def _core_decompositions() -> frozenset[str]:
    # internal: see runtime/torch_internals.py "torch._decomp.core_aten_decompositions"
    from torch._decomp import core_aten_decompositions

    return frozenset(op.name() for op in core_aten_decompositions() if hasattr(op, "overloadpacket"))


@functools.lru_cache(maxsize=1)
def _decompositions() -> frozenset[str]:
    """Every op PyTorch's decomposition registry decomposes (into core ATen or prims, which a
    compiler lowers: Inductor does), beyond the core-ATen table."""
    # internal: see runtime/torch_internals.py "torch._decomp.decomposition_table"
    from torch._decomp import decomposition_table

    return frozenset(op.name() for op in decomposition_table if hasattr(op, "overloadpacket"))


@functools.lru_cache(maxsize=None)
def _facts(packet: str) -> _Facts:
    overloads = _overloads(packet)
    keys = {k for o in overloads for k in (*_DENSE_KEYS, *_SPARSE_KEYS, *_QUANTIZED_KEYS,
                                              "CUDA", "MPS", "MkldnnCPU", "NestedTensorCPU",
                                              "NestedTensorCUDA") if _has_kernel(o, k)}
    dense = bool(keys & set(_DENSE_KEYS))
    sparse = bool(keys & set(_SPARSE_KEYS))
    # Quantized when the op itself (its out= overload aside, a composite for every op that
    # has one) has only a quantized kernel: aten::int_repr.
    main = [o for o in overloads if torch.Tag.out not in o.tags] or overloads
    quantized_only = any(_has_kernel(o, k) for o in main for k in _QUANTIZED_KEYS) and not any(
        _has_kernel(o, k) for o in main for k in _DENSE_KEYS)
    base = packet.split("::", 1)[1]
    tags = {t for o in overloads for t in o.tags}
    return _Facts(
        packet=packet,
        runs=dense or sparse or quantized_only,
        quantized=quantized_only or bool(_MAKES_QUANTIZED.fullmatch(base)),
        sparse_only=sparse and not dense,
        moves_bits=packet in _MOVES_BITS or packet in _MEMORY
        or bool(tags & {torch.Tag.inplace_view, torch.Tag.view_copy})
        or any(o.is_view for o in overloads),
        # internal: see runtime/torch_internals.py "torch._ops.OpOverload._schema"
        # Tensor, Tensor[] and Tensor? results all count; an op writing into its arguments
        # (aten::_cummax_helper) computes although it returns nothing.
        no_tensor=all(not o._schema.is_mutable
                      and not any("Tensor" in str(r.type) for r in o._schema.returns)
                      for o in overloads),
        dynamic_shape=torch.Tag.dynamic_output_shape in tags,
        reads_value=torch.Tag.data_dependent_output in tags,
        core=torch.Tag.core in tags,
        composite=any(_has_kernel(o, "CompositeImplicitAutograd") for o in overloads),
        decomposes=any(o.name() in _core_decompositions() for o in overloads),
        decomposes_to_prims=any(o.name() in _decompositions() for o in overloads),
        random=torch.Tag.nondeterministic_seeded in tags,
        kernels=tuple(sorted(keys)),
    )


@functools.lru_cache(maxsize=None)
def host_fallback_ops(namespace: str = "aten") -> tuple[tuple[str, str], ...]:
    """(op, reason) for every op of `namespace` the device runs that the table classes a host
    fallback whatever its dtype, for the readiness accounting to count at run time (it finds
    float64 and sparse calls by their operands). Data-dependent output shapes are left out: the
    accounting counts those calls as host syncs (aten::index only with a boolean mask)."""
    out = []
    for packet in device_ops(namespace):
        answer = classify(packet)
        if answer.category == HOST_FALLBACK and "data-dependent" not in answer.reason:
            out.append((packet, answer.reason))
    return tuple(out)
