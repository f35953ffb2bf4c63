"""What AWS publishes about operator support on Trainium, as data, each entry with its source:
the op-support table (op_support.py) takes AWS's classification wherever these list an op, and
its own stated rule elsewhere. Nothing here is inferred: an op AWS does not list is absent.

Two AWS documents were read (stored copies, December 2026):

- SUPPORTED_OPERATORS_PAGE, "Supported PyTorch APIs and operators" (TorchNeuron, date-modified
  2026-11-06): how the torch-neuronx compatibility table classifies each API: `Y` (supported; its
  limitations say Native, Host-only or Needs a process group), `CPU_FALLBACK` ("the named ATen
  operator runs on the CPU and the result is copied back to the Neuron device. The model runs;
  the operation is slower", with the dtypes affected where coverage differs by dtype) and `N`
  (not supported: quantized operator variants, among others). The per-API table it points to
  (COMPATIBILITY_TABLE, in the torch-neuronx repository) was not among the stored copies, so no
  row here comes from it; AWS_CLASSES maps its three values onto the table's classes.
- LISTED_OPERATORS_PAGE, "PyTorch Neuron (torch-neuronx) - Supported Operators": the ATen
  operators AWS lists as supported by torch-neuronx (relevant for Inf2, Trn1, Trn2, Trn3), with
  no dtype detail. Each is `Y` with the limitation Native."""

from __future__ import annotations

SUPPORTED_OPERATORS_PAGE = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/"
    "supported-operators.html")
COMPATIBILITY_TABLE = (
    "https://github.com/aws-neuron/torch-neuronx/blob/main/docs/torch_api_compatibility.md")
LISTED_OPERATORS_PAGE = (
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/frameworks/torch/torch-neuronx/"
    "pytorch-neuron-supported-operators.html")
# The release the "latest" pages above belong to: Neuron 2.33.0 (torch-neuronx 2.13.3.0 and
# 2.14.3.0, released 2026-10-19) is the newest release the stored release notes name. The same
# list stands, unchanged in what the stored copies show, in the pinned v2.29.0 documentation
# (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.29.0/_sources/frameworks/torch/
# torch-neuronx/pytorch-neuron-supported-operators.rst, date-modified 2026-03-13).
LISTED_OPERATORS_VERSION = "Neuron SDK 2.33.0 docs (latest); same list in 2.29.0"

# AWS's compatibility values -> the table's classes.
AWS_CLASSES = {"Y": "native", "CPU_FALLBACK": "host fallback", "N": "unsupported"}

# The ATen operators LISTED_OPERATORS_PAGE lists, in its order (`Y`, Native).
LISTED_OPERATORS = (
    "aten::_s_where", "aten::_softmax", "aten::_softmax_backward_data", "aten::_unsafe_view",
    "aten::add", "aten::addcdiv_", "aten::addcmul", "aten::addmm", "aten::bernoulli_",
    "aten::bmm", "aten::constant_pad_nd", "aten::div", "aten::embedding",
    "aten::embedding_dense_backward", "aten::empty", "aten::expand", "aten::fill_",
    "aten::index_select", "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::lt",
    "aten::mm", "aten::mul", "aten::native_batch_norm", "aten::native_batch_norm_backward",
    "aten::neg", "aten::permute", "aten::relu", "aten::rsub", "aten::select", "aten::slice",
    "aten::sqrt", "aten::sum", "aten::t", "aten::tanh", "aten::tanh_backward",
    "aten::threshold_backward", "aten::transpose", "aten::unsqueeze", "aten::view",
    "aten::zero_",
)


def listed(packet: str) -> tuple[str, str, str] | None:
    """(AWS value, source URL, version) for an op packet ("aten::add") AWS lists, else None.
    Every overload of a listed packet is listed ("aten::add.out" is "aten::add"); an in-place op
    is a packet of its own, listed only where AWS names it ("aten::addcdiv_", "aten::fill_"), so
    the rule decides "aten::add_"."""
    if packet in _LISTED:
        return "Y", LISTED_OPERATORS_PAGE, LISTED_OPERATORS_VERSION
    return None


_LISTED = frozenset(LISTED_OPERATORS)
