"""Matmuls of compiled neuron graphs on oneDNN (torchneuron/compile/onednn_gemm.py): which ones
go there, that their results agree with eager neuron and the CPU, and how to turn it off."""

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from compile_helpers import compare_training_step
from torchneuron.compile.gemm_by_size import MIN_MULTIPLY_ADDS

ONEDNN = "mkldnn._linear_pointwise"


def gemm_calls(code: str) -> tuple[int, int]:
    """(oneDNN calls, ATen mm/addmm calls) in generated wrapper code."""
    return code.count(ONEDNN), code.count("extern_kernels.mm(") + code.count("extern_kernels.addmm(")


def wide_mlp():
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                               torch.nn.Linear(512, 256))


def test_large_linear_layers_train_on_onednn_and_agree_with_eager_and_cpu():
    # 64x256x512 multiply-adds per layer (8M): over the threshold, forward and backward.
    torch.manual_seed(0)
    model, x = wide_mlp(), torch.randn(64, 256)
    _, codes = run_and_get_code(lambda: compare_training_step(model, x))
    forward, backward = codes
    assert gemm_calls(forward) == (2, 0)
    # grad of the second layer's input and of both weights (x needs no gradient)
    assert gemm_calls(backward) == (3, 0)


def test_bare_torch_compile_takes_onednn_too():
    model, x = wide_mlp().to("neuron"), torch.randn(64, 256, device="neuron")
    with torch.no_grad():
        out, (code, *_) = run_and_get_code(torch.compile(model), x)
        torch.testing.assert_close(out, model(x))
    assert gemm_calls(code) == (2, 0)


def test_onednn_is_as_accurate_as_atens_kernel():
    # oneDNN sums in another order than MKL, so results differ in the last bits; measured
    # against float64, its error is of the same order as the eager (ATen) result's. How much
    # larger depends on the CPU's kernels (AVX2's brgemm blocking: ~4x MKL's on an AMD EPYC);
    # a reduced-precision path (bf16/tf32 accumulation) would be ~100x off.
    torch.manual_seed(0)
    a, b = torch.randn(256, 1024), torch.randn(1024, 256)
    exact = (a.double() @ b.double()).float()
    fn = torch.compile(torch.mm, backend="neuron")
    compiled, (code, *_) = run_and_get_code(fn, a.to("neuron"), b.to("neuron"))
    eager = a.to("neuron") @ b.to("neuron")
    assert gemm_calls(code) == (1, 0)
    compiled_error = (compiled.cpu() - exact).abs().max().item()
    eager_error = (eager.cpu() - exact).abs().max().item()
    assert compiled_error <= 10 * eager_error + 1e-6, (compiled_error, eager_error)
    torch.testing.assert_close(compiled.cpu(), exact, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case", ["small", "matrix_vector", "outer_product", "scaled_addmm",
                                  "full_bias", "bfloat16"])
def test_other_matmuls_keep_atens_kernel(case):
    # Where oneDNN is not faster (under 4M multiply-adds, N=1, K=1) or the call is not a
    # linear layer's (alpha/beta, a bias per element), and for dtypes other than float32.
    torch.manual_seed(0)
    dtype = torch.bfloat16 if case == "bfloat16" else torch.float32
    a_shape, b_shape = {"small": ((16, 32), (32, 32)), "matrix_vector": ((4096, 1024), (1024, 1)),
                        "outer_product": ((4096, 1), (1, 1024))}.get(case, ((256, 256), (256, 256)))
    a, b = torch.randn(a_shape, dtype=dtype), torch.randn(b_shape, dtype=dtype)
    bias = torch.randn(a_shape[0], b_shape[1]) if case == "full_bias" else torch.randn(b_shape[1])
    if case in ("scaled_addmm", "full_bias"):
        fn = (lambda a, b, c: torch.addmm(c, a, b, beta=0.5)) if case == "scaled_addmm" else \
            (lambda a, b, c: torch.addmm(c, a, b))
        args = (a, b, bias)
    else:
        fn, args = torch.mm, (a, b)
    torch._dynamo.reset()
    out, (code, *_) = run_and_get_code(torch.compile(fn, backend="neuron"),
                                       *(t.to("neuron") for t in args))
    # (Inductor itself turns a K=1 product into a pointwise kernel.)
    assert gemm_calls(code) == (0, 0 if case == "outer_product" else 1)
    torch.testing.assert_close(out.cpu(), fn(*args))


def test_linear_with_bias_is_one_onednn_call():
    layer, x = torch.nn.Linear(256, 512).to("neuron"), torch.randn(4, 64, 256, device="neuron")
    with torch.no_grad():
        out, (code, *_) = run_and_get_code(torch.compile(layer, backend="neuron"), x)
        torch.testing.assert_close(out, layer(x))
    assert gemm_calls(code) == (1, 0)
    assert "cpp_fused" not in code  # the bias is added by oneDNN, not by a kernel of its own


def kernels_run(fn, *args) -> set[str]:
    """The matmul kernels a call of fn dispatched (profiler events)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn(*args)
        torch.neuron.synchronize()
    names = {e.name for e in prof.events()}
    return names & {"aten::mm", "aten::addmm", "mkldnn::_linear_pointwise"}


def test_dynamic_batch_picks_by_the_size_it_sees_and_stays_correct():
    # One graph for every batch (vLLM compiles prefill and decode so): the kernel is chosen at the
    # call, from the rows it gets (gemm_by_size.linear_by_size), not from the compile-time hint.
    model = wide_mlp().to("neuron")
    fn = torch.compile(model, backend="neuron", dynamic=True)
    with torch.no_grad():
        _, (code, *_) = run_and_get_code(fn, torch.randn(64, 256, device="neuron"))
        assert code.count("torchneuron.linear_by_size") == 2 and gemm_calls(code) == (0, 0)
        for batch in (1, 8, 200):  # 256x512 per row: oneDNN from 32 rows (MIN_MULTIPLY_ADDS)
            x = torch.randn(batch, 256, device="neuron")
            onednn = batch * 256 * 512 >= MIN_MULTIPLY_ADDS
            kernels = kernels_run(fn, x)
            assert ("mkldnn::_linear_pointwise" in kernels) == onednn, (batch, kernels)
            assert bool(kernels & {"aten::mm", "aten::addmm"}) != onednn, (batch, kernels)
            torch.testing.assert_close(fn(x).cpu(), model.cpu()(x.cpu()))
            model.to("neuron")


def test_linear_by_size_agrees_with_the_cpu_on_either_side_of_the_rule():
    linear_by_size = torch.ops.torchneuron.linear_by_size
    torch.manual_seed(0)
    weight, bias = torch.randn(512, 256), torch.randn(512)
    for rows in (1, 64):  # 1x256x512 under the threshold, 64x256x512 over it
        x = torch.randn(rows, 256)
        for b in (bias, None):
            out = linear_by_size(x.to("neuron"), weight.to("neuron"),
                                 None if b is None else b.to("neuron"))
            # oneDNN sums in another order than the CPU's MKL (test_onednn_is_as_accurate...)
            torch.testing.assert_close(out.cpu(), torch.nn.functional.linear(x, weight, b),
                                       rtol=1e-5, atol=1e-4)


def test_linear_by_size_refuses_mismatched_sizes_as_linear_does():
    x, weight = torch.randn(4, 256, device="neuron"), torch.randn(512, 128, device="neuron")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.ops.torchneuron.linear_by_size(x, weight, None)


def test_weights_changed_after_compiling_are_read_as_they_are():
    # No prepacked copy of the weights: an optimizer step after compiling is seen.
    model, x = wide_mlp().to("neuron"), torch.randn(64, 256, device="neuron")
    fn = torch.compile(model, backend="neuron")
    with torch.no_grad():
        before = fn(x)
        for p in model.parameters():
            p.mul_(0.5).add_(0.01)
        after = fn(x)
        torch.testing.assert_close(after, model(x))
    assert not torch.allclose(before, after)


def test_onednn_turned_off_in_torch_backends_keeps_atens_kernel():
    model, x = wide_mlp().to("neuron"), torch.randn(64, 256, device="neuron")
    with torch.backends.mkldnn.flags(enabled=False), torch.no_grad():
        out, (code, *_) = run_and_get_code(torch.compile(model, backend="neuron"), x)
        torch.testing.assert_close(out, model(x), rtol=0, atol=0)
    assert gemm_calls(code) == (0, 2)


def test_cpu_graphs_under_backend_neuron_keep_atens_kernel():
    model, x = wide_mlp(), torch.randn(64, 256)
    with torch.no_grad():
        out, (code, *_) = run_and_get_code(torch.compile(model, backend="neuron"), x)
        torch.testing.assert_close(out, model(x))
    assert gemm_calls(code) == (0, 2)


def test_neuron_compile_gemm_aten_keeps_the_cpus_kernels(python):
    code = ("import torch\n"
            "from torch._inductor.utils import run_and_get_code\n"
            "from torchneuron.compile.inductor import CodegenFingerprint\n"
            "m = torch.nn.Linear(256, 512).to('neuron'); x = torch.randn(64, 256, device='neuron')\n"
            "out, (code, *_) = run_and_get_code(torch.compile(m, backend='neuron'), x)\n"
            "torch.testing.assert_close(out, m(x), rtol=0, atol=0)\n"
            "print('mkldnn' in code, 'extern_kernels.addmm(' in code,\n"
            "      b'gemm=aten' in CodegenFingerprint().uuid())\n")
    r = python(code, env={"NEURON_COMPILE_GEMM": "aten"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "True"]
    # A bad value never breaks `import torch`; the first neuron call names it.
    bad = python("import torch; print('imported'); torch.ones(1, device='neuron')",
                 env={"NEURON_COMPILE_GEMM": "mkl"})
    assert bad.stdout.strip() == "imported" and bad.returncode != 0
    assert "NEURON_COMPILE_GEMM='mkl' is not valid; accepted values: onednn, aten" in bad.stderr
