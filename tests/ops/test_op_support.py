"""The op-support table (torchneuron/ops/op_support.py): the rule on examples, AWS's entries
taking AWS's class with their source, the rule agreeing with the float64 counts the device keeps
at run time, clear errors for bad names and arguments, and docs/op-support.md never stale."""

import pytest
import torch

from torchneuron import cli
from torchneuron.ops import dtype_policy
from torchneuron.ops import op_support as support
from torchneuron.ops import op_support_aws as aws
from torchneuron.ops import op_support_page as page

NATIVE, HOST, UNSUPPORTED = support.NATIVE, support.HOST_FALLBACK, support.UNSUPPORTED


@pytest.mark.parametrize("op, dtype, layout, category, source, reason", [
    ("aten::add.Tensor", torch.float32, torch.strided, NATIVE, "aws", "AWS lists it"),
    ("aten::add.Tensor", torch.float64, torch.strided, HOST, "rule", "float64 arithmetic"),
    ("aten::mul.Tensor", torch.complex128, torch.strided, HOST, "rule", "complex128"),
    ("aten::add.Tensor", torch.float32, torch.sparse_coo, HOST, "rule", "sparse layout"),
    ("aten::_values", None, torch.strided, HOST, "rule", "sparse-only op"),
    ("aten::nonzero", torch.float32, torch.strided, HOST, "rule", "data-dependent output"),
    ("aten::masked_select", None, torch.strided, HOST, "rule", "data-dependent output"),
    ("aten::_unique2", None, torch.strided, HOST, "rule", "data-dependent output"),
    ("aten::quantize_per_tensor", None, torch.strided, UNSUPPORTED, "rule", "quantized"),
    ("aten::int_repr", None, torch.strided, UNSUPPORTED, "rule", "quantized"),
    ("aten::cat", torch.float32, torch.strided, NATIVE, "rule", "core ATen op"),
    ("aten::cat", torch.float64, torch.strided, NATIVE, "rule", "core ATen op"),  # moves bits
    ("aten::linear", torch.bfloat16, torch.strided, NATIVE, "rule", "CompositeImplicitAutograd"),
    ("aten::addcmul", None, torch.strided, NATIVE, "aws", "AWS lists it"),
    ("aten::addcmul_", None, torch.strided, NATIVE, "rule", "in-place variant of aten::addcmul"),
    ("aten::_local_scalar_dense", None, torch.strided, NATIVE, "rule", "host sync"),
    ("aten::cummax", torch.float32, torch.strided, HOST, "rule", "no core-ATen lowering"),
    ("aten::fmax", torch.float32, torch.strided, NATIVE, "rule", "core ATen and prims"),
    ("aten::normal", torch.float32, torch.strided, NATIVE, "rule", "own generator"),
    ("aten::uniform_", torch.float32, torch.strided, NATIVE, "rule", "in-place variant"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", torch.float32,
     torch.strided, NATIVE, "rule", "backward of aten::_scaled_dot_product_flash_attention_for_cpu"),
    ("aten::convolution_overrideable", torch.float32, torch.strided, NATIVE, "rule",
     "backend hook of aten::convolution"),
    ("aten::_foreach_mul_.List", torch.float32, torch.strided, NATIVE, "rule",
     "foreach form of aten::mul (aws"),
    ("aten::view_copy", torch.float64, torch.strided, NATIVE, "rule", "no arithmetic"),
    ("aten::_copy_from", torch.float32, torch.strided, NATIVE, "rule", "no arithmetic"),
    ("aten::_assert_async", None, torch.strided, NATIVE, "rule", "no tensor result"),
    ("aten::_fused_adam_", torch.float32, torch.strided, HOST, "rule",
     "in-place variant of aten::_fused_adam (rule: no core-ATen lowering"),  # Tensor[] results
])
def test_the_rule_on_examples(op, dtype, layout, category, source, reason):
    result = support.classify(op, dtype, layout)
    assert (result.category, result.source) == (category, source), result
    assert reason in result.reason, result


def test_an_aws_listed_op_takes_aws_class_with_its_document_and_version():
    for op in ("aten::mm", torch.ops.aten.mm.default, torch.ops.aten.mm, "aten.mm.default"):
        result = support.classify(op, torch.bfloat16)
        assert (result.category, result.source) == (NATIVE, "aws"), op
        assert result.url == aws.LISTED_OPERATORS_PAGE and result.version.startswith("Neuron SDK")
    category, source, reason = support.classify("aten::nonzero")  # unpacks as a triple
    assert (category, source) == (HOST, "rule") and "dynamic_output_shape" in reason


def test_every_op_aws_lists_keeps_aws_class_or_is_named_as_gone():
    ops = set(support.device_ops())
    gone = [packet for packet in aws.LISTED_OPERATORS if packet not in ops]
    assert gone == ["aten::_s_where"]  # removed from PyTorch since AWS's list
    with pytest.raises(ValueError, match="unknown op 'aten::_s_where'"):
        support.classify("aten::_s_where")
    assert "`aten::_s_where` is no operator on torch" in page.render()
    for packet in sorted(ops & set(aws.LISTED_OPERATORS)):
        assert support.classify(packet).source == "aws", packet
    assert set(aws.AWS_CLASSES.values()) == set(support.CLASSES)


def test_the_rule_agrees_with_the_float64_counts_the_device_keeps():
    d = torch.randn(4, 3, dtype=torch.float64)
    n = d.to("neuron")
    dtype_policy.reset_host_fallback_counts()
    try:
        with dtype_policy.float64_policy("allow"):
            got_mul, got_cat = n * n, torch.cat([n, n])
        torch.testing.assert_close(got_mul.cpu(), d * d)
        torch.testing.assert_close(got_cat.cpu(), torch.cat([d, d]))
        counted = dtype_policy.host_fallback_counts()
    finally:
        dtype_policy.reset_host_fallback_counts()
    assert "aten::mul.Tensor" in counted, counted
    assert not any(op.startswith("aten::cat") for op in counted), counted
    for op in counted:
        assert support.classify(op, torch.float64).category == HOST, op
    assert support.classify("aten::cat.default", torch.float64).category == NATIVE


def test_every_device_op_has_a_class_a_source_and_a_namespace():
    ops = support.device_ops()
    assert len(ops) > 1000 and "aten::add" in ops and "aten::record_stream" in ops
    assert "aten::_flash_attention_forward" in support.not_run()  # CUDA-only
    for op in ops:
        result = support.classify(op)
        assert result.category in support.CLASSES and result.source in support.SOURCES, op
        assert result.reason and support.python_namespace(op), op
    assert support.python_namespace("aten::gelu") == "torch.nn.functional"
    assert support.python_namespace("aten::linalg_vector_norm") == "torch.linalg"
    assert support.python_namespace("aten::_softmax") == "internal"


def test_what_runs_on_the_host_per_class():
    assert support.host_dtypes("aten::mul.Tensor") == "float64, complex128, sparse"
    assert support.host_dtypes("aten::cat") == "sparse"  # moves bits: float64 stays native
    assert support.host_dtypes("aten::nonzero") == "every dtype"
    assert support.host_dtypes("aten::quantize_per_tensor") == ""


def test_classify_is_cached_per_op_dtype_and_layout():
    first = support.classify("aten::sub.Tensor", torch.float16)
    assert support.classify("aten::sub.Tensor", torch.float16) is first
    assert support.classify("aten::sub.Tensor", torch.float64) is not first


@pytest.mark.parametrize("op, error, message", [
    ("aten::no_such_op", ValueError, "unknown op 'aten::no_such_op'"),
    ("aten::add.NoSuchOverload", ValueError, "unknown op 'aten::add.NoSuchOverload'"),
    ("add", ValueError, "expected a name such as 'aten::add'"),
    (42, TypeError, "op must be an op name"),
    (["aten::add"], TypeError, "op must be an op name .* not list"),
])
def test_a_bad_op_name_is_an_error_naming_it(op, error, message):
    with pytest.raises(error, match=message):
        support.classify(op)


def test_bad_dtype_and_layout_are_errors_naming_them():
    with pytest.raises(TypeError, match="dtype must be a torch.dtype or None, not 'float32'"):
        support.classify("aten::add.Tensor", "float32")
    with pytest.raises(TypeError, match="layout must be a torch.layout"):
        support.classify("aten::add.Tensor", torch.float32, "sparse")


def test_the_page_is_current():
    written_on = page.PAGE.read_text(encoding="utf-8").split("on torch ", 1)[1].split(";")[0]
    if written_on != page.torch_version():
        pytest.skip(f"docs/op-support.md is generated on torch {written_on}")
    assert page.differs() is None
    assert cli.main(["op-support", "--check"]) == 0


def test_a_stale_or_missing_page_is_named_and_check_fails(tmp_path, monkeypatch, capsys):
    path = tmp_path / "op-support.md"
    monkeypatch.setattr(page, "PAGE", path)
    assert cli.main(["op-support", "--check"]) == 1
    assert "does not exist; run `torchneuron op-support`" in capsys.readouterr().err
    path.write_text(page.render().replace("| native |", "| unsupported |", 1))
    assert cli.main(["op-support", "--check"]) == 1
    assert "is stale (first difference at line" in capsys.readouterr().err
    assert cli.main(["op-support"]) == 0 and page.differs() is None  # writes it afresh
