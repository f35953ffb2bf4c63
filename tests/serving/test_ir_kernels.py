"""vLLM's RMS norms on neuron (torchneuron/serving/ir_kernels.py): in eager mode the platform ranks
vLLM CPU's compiled kernels first, they give what vLLM's PyTorch-native form gives on the CPU,
and every layout they cannot take keeps the native form. No engine: the IR ops are called
directly."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("vllm")

from vllm import ir  # noqa: E402
from vllm.config.compilation import CompilationMode  # noqa: E402

from torchneuron.serving import ir_kernels  # noqa: E402
from torchneuron.serving.neuron_platform import NeuronPlatform  # noqa: E402

EPS = 1e-6
KERNELS_FIRST = [ir_kernels.PROVIDER, "native"]


def native_rms_norm(x, weight, variance_size=None):
    return ir.ops.rms_norm.impls["native"].impl_fn(x, weight, EPS, variance_size)


def native_fused_add_rms_norm(x, residual, weight):
    return ir.ops.fused_add_rms_norm.impls["native"].impl_fn(x, residual, weight, EPS)


def inputs(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=generator) * 3, torch.randn(shape, generator=generator),
            torch.randn(shape[-1], generator=generator))


@pytest.mark.parametrize("shape", [(1, 128), (7, 128), (3, 5, 128), (130, 64)],
                         ids=["decode", "batch", "3-D", "prefill"])
def test_rms_norm_on_neuron_runs_vllm_cpus_kernel_and_matches_the_native_form(shape):
    x, _, weight = inputs(shape)
    nx, nweight = x.to("neuron"), weight.to("neuron")
    with ir.ops.rms_norm.set_priority(KERNELS_FIRST):
        assert ir.ops.rms_norm.dispatch(nx, nweight, EPS).provider == ir_kernels.PROVIDER
        out = ir.ops.rms_norm(nx, nweight, EPS)
    assert out.device.type == "neuron" and out.shape == shape
    torch.testing.assert_close(out.cpu(), native_rms_norm(x, weight))
    torch.testing.assert_close(nx.cpu(), x, rtol=0, atol=0)  # the input is left as it was


@pytest.mark.parametrize("shape", [(1, 128), (7, 128), (3, 5, 128)],
                         ids=["decode", "batch", "3-D"])
def test_fused_add_rms_norm_on_neuron_writes_the_norm_and_the_sum_in_place(shape):
    x, residual, weight = inputs(shape)
    expected_out, expected_sum = native_fused_add_rms_norm(x, residual, weight)
    nx, nresidual, nweight = x.to("neuron"), residual.to("neuron"), weight.to("neuron")
    op = ir.ops.fused_add_rms_norm
    with op.set_priority(KERNELS_FIRST):
        assert op.dispatch(nx, nresidual, nweight, EPS).provider == ir_kernels.PROVIDER
        out, summed = op.maybe_inplace(nx, nresidual, nweight, EPS)
    # vLLM's in-place form: the results are the very tensors it was given.
    assert out is nx and summed is nresidual
    torch.testing.assert_close(out.cpu(), expected_out)
    torch.testing.assert_close(summed.cpu(), expected_sum, rtol=0, atol=0)


def test_functional_fused_add_rms_norm_leaves_its_inputs_alone():
    # vLLM's default (functional) overload runs an in-place implementation on copies.
    x, residual, weight = inputs((4, 128))
    nx, nresidual = x.to("neuron"), residual.to("neuron")
    with ir.ops.fused_add_rms_norm.set_priority(KERNELS_FIRST):
        out, summed = ir.ops.fused_add_rms_norm(nx, nresidual, weight.to("neuron"), EPS)
    expected_out, expected_sum = native_fused_add_rms_norm(x, residual, weight)
    torch.testing.assert_close(out.cpu(), expected_out)
    torch.testing.assert_close(summed.cpu(), expected_sum, rtol=0, atol=0)
    torch.testing.assert_close(nx.cpu(), x, rtol=0, atol=0)
    torch.testing.assert_close(nresidual.cpu(), residual, rtol=0, atol=0)


def test_what_the_kernels_cannot_take_keeps_the_native_form():
    x, _, weight = inputs((4, 256))
    nx, nweight = x.to("neuron"), weight[:128].to("neuron")
    # The kernel reads rows at a contiguous tensor's stride: on a view of every other half-row
    # it would normalize the wrong numbers.
    view = nx[:, :128]
    cases = {
        "non-contiguous": (view, nweight, None),
        "cpu tensors": (x[:, :128].contiguous(), weight[:128], None),
        "no weight": (view.contiguous(), None, None),
        "weight of another dtype": (view.contiguous(), nweight.double(), None),
        "variance over part of the row": (view.contiguous(), nweight, 64),
    }
    with ir.ops.rms_norm.set_priority(KERNELS_FIRST):
        for name, (xs, w, variance_size) in cases.items():
            assert ir.ops.rms_norm.dispatch(xs, w, EPS, variance_size).provider == "native", name
        out = ir.ops.rms_norm(view, nweight, EPS)
    torch.testing.assert_close(out.cpu(), native_rms_norm(x[:, :128], weight[:128]))

    residual = torch.randn(4, 256, device="neuron")[:, :128]
    with ir.ops.fused_add_rms_norm.set_priority(KERNELS_FIRST):
        assert ir.ops.fused_add_rms_norm.dispatch(
            view.contiguous(), residual, nweight, EPS).provider == "native"


@pytest.mark.parametrize("mode, backend, expected", [
    (CompilationMode.NONE, "inductor", KERNELS_FIRST),
    (CompilationMode.VLLM_COMPILE, "eager", KERNELS_FIRST),
    (CompilationMode.VLLM_COMPILE, "inductor", ["native"]),
], ids=["eager", "compiled without inductor", "inductor"])
def test_platform_ranks_the_kernels_first_unless_inductor_generates_code(mode, backend,
                                                                         expected):
    config = SimpleNamespace(compilation_config=SimpleNamespace(mode=mode, backend=backend))
    priority = NeuronPlatform.get_default_ir_op_priority(config)
    assert priority.rms_norm == priority.fused_add_rms_norm == expected
    assert priority.gelu_and_mul_sparse == ["native"]
