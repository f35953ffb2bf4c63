"""What torch.compile generates for neuron tensors: fused C++ kernels on neuron memory, buffers
allocated on neuron, reached both as backend="neuron" and as a bare torch.compile."""

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from torchneuron.compile.inductor import CodegenFingerprint

from compile_models import CNN, MLP, TransformerBlock, cnn_input, mlp_input, \
    transformer_input


def pointwise_and_reduction(a, b):
    h = torch.nn.functional.gelu(a * 2 + b).sin()
    return h.softmax(-1), h.sum(0) @ b


def test_import_torch_loads_no_compiler(python):
    # Registration is lazy: Dynamo and Inductor cost ~1.5 s and load only when a compile asks.
    r = python("import sys, torch; torch.ones(1, device='neuron'); "
               "print('torch._dynamo' in sys.modules, 'torch._inductor' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


def test_backend_is_registered():
    assert "neuron" in torch._dynamo.list_backends()


@pytest.mark.parametrize("backend", ["neuron", "inductor"])
def test_generated_code_runs_fused_cpp_kernels_on_neuron_memory(backend):
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    fn = torch.compile(pointwise_and_reduction, backend=backend)
    out, (code, *_) = run_and_get_code(fn, a.neuron(), b.neuron())

    assert "cpp_fused_" in code and 'extern "C"' in code  # Inductor's C++ kernels, fused
    # The wrapper allocates its buffers on neuron, through torchneuron._C's fast path.
    assert "= empty_strided_neuron(" in code and "= empty_strided(" not in code
    assert "= empty_strided_cpu(" not in code and "device='cpu'" not in code
    for got, want in zip(out, pointwise_and_reduction(a, b)):
        assert got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), want)


def test_intermediate_buffers_come_from_the_neuron_allocator():
    def chain(x):
        return (x.exp() @ x).relu() @ x  # the matmul outputs are wrapper-allocated buffers

    x = torch.randn(256, 256)
    fn = torch.compile(chain, backend="neuron")
    fn(x.neuron())
    torch.neuron.reset_peak_memory_stats()
    before = torch.neuron.memory_allocated()
    out = fn(x.neuron())
    # At least the output and one intermediate 256x256 float32 buffer lived on neuron.
    assert torch.neuron.max_memory_allocated() - before >= 2 * 256 * 256 * 4
    # Its 256^3 matmuls run on oneDNN (onednn_gemm.py), which sums in another order than the
    # CPU's MKL: both land within 1e-6 of the output's scale from the float64 result.
    exact = chain(x.double())
    tolerance = 1e-6 * exact.abs().max().item()
    torch.testing.assert_close(out.cpu().double(), exact, rtol=0, atol=tolerance)
    torch.testing.assert_close(torch.compile(chain)(x).double(), exact, rtol=0, atol=tolerance)


def test_cpp_wrapper_is_refused_by_name_on_bare_inductor():
    fn = torch.compile(pointwise_and_reduction, options={"cpp_wrapper": True})
    x = torch.randn(4, 4, device="neuron")
    with pytest.raises(Exception, match="does not support cpp_wrapper=True"):
        fn(x, x)


def test_cpu_tensors_under_backend_neuron_compile_for_the_cpu():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    out = torch.compile(pointwise_and_reduction, backend="neuron")(a, b)
    for got, want in zip(out, pointwise_and_reduction(a, b)):
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, want)


def test_inductor_cache_key_carries_neurons_codegen_fingerprint(python):
    # A fresh process, where the first compile is a bare torch.compile: Inductor registers
    # PrivateUse1 itself then, which would drop the fingerprint (backend="neuron" registers
    # neuron before Inductor looks).
    r = python("import torch; from torch._inductor.codegen.common import custom_backend_passes; "
               "torch.compile(lambda x: x.sin() + 1)(torch.ones(4, device='neuron')); "
               "print(type(custom_backend_passes['neuron']).__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "CodegenFingerprint"


def test_codegen_fingerprint_hashes_the_compile_package_and_the_kernels():
    from torch._inductor.custom_graph_pass import get_hash_for_files

    import torchneuron.compile.conv_layout as conv_layout
    from torchneuron import _C

    sources = CodegenFingerprint.sources()
    assert conv_layout.__file__ in sources and _C.__file__ in sources
    threads = torch.get_num_threads()
    assert CodegenFingerprint().uuid() == \
        get_hash_for_files(sources) + b"gemm=onednn" + f"threads={threads}".encode()


def test_codegen_fingerprint_follows_the_thread_count():
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = CodegenFingerprint().uuid()
        torch.set_num_threads(2)
        two = CodegenFingerprint().uuid()
    finally:
        torch.set_num_threads(threads)
    assert one.endswith(b"threads=1") and two.endswith(b"threads=2")


SERIAL_OR_PARALLEL = (
    "import torch\n"
    "from torch._inductor.codecache import PyCodeCache\n"
    "torch.set_num_threads({threads})\n"
    "x = torch.randn(64, 4096, device='neuron')\n"
    "torch.compile(lambda x: (x.sin() * 2).relu(), backend='neuron')(x)\n"
    "print(any('omp parallel' in open(m.__file__).read() for m in PyCodeCache.modules))\n")


@pytest.mark.slow
def test_a_graph_cached_under_one_thread_is_compiled_again_for_two(python, tmp_path):
    # The kernels of a graph compiled with one intra-op thread are serial; a later process
    # with two threads must not load them from Inductor's on-disk cache.
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    for threads, parallel in (("1", "False"), ("2", "True"), ("1", "False")):
        r = python(SERIAL_OR_PARALLEL.format(threads=threads), env=env)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[-1] == parallel, (threads, r.stdout)


@pytest.mark.parametrize("width", [256, 4096], ids=["short_rows", "long_rows"])
def test_layer_norm_statistics_are_generated_as_for_the_cpu(width):
    # The C++ backend computes mean and variance in two vectorized passes for rows up to
    # config.cpp.use_two_step_variance_threshold (1024) elements and with Welford's update
    # beyond; neuron's kernels come from that backend and follow the same rule.
    norm, x = torch.nn.LayerNorm(width), torch.randn(8, width)
    codes = {}
    for device in ("cpu", "neuron"):
        torch._dynamo.reset()
        fn = torch.compile(norm.to(device), backend="neuron" if device == "neuron" else "inductor")
        out, (codes[device], *_) = run_and_get_code(fn, x.to(device))
        torch.testing.assert_close(out.cpu(), norm.cpu()(x))
    assert ("welford" in codes["neuron"]) == ("welford" in codes["cpu"]) == (width > 1024)


def test_cnn_gets_the_cpus_channels_last_plan():
    # With oneDNN, Inductor plans channels-last activations for every CPU graph with a
    # convolution; neuron's convolution is that oneDNN kernel, so its graphs get the same plan.
    model, x = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).eval(), \
        torch.randn(2, 3, 8, 8)
    plans = {}
    for device in ("cpu", "neuron"):
        torch._dynamo.reset()
        fn = torch.compile(model.to(device), backend="neuron" if device == "neuron" else "inductor")
        with torch.no_grad():
            out, (code, *_) = run_and_get_code(fn, x.to(device))
        torch.testing.assert_close(out.cpu(), model.cpu()(x))
        channels_last = str(x.to(memory_format=torch.channels_last).stride())
        plans[device] = (channels_last in code.split("def call")[1], out.stride())
    assert plans["neuron"] == plans["cpu"] and plans["cpu"][0]  # the input copied channels-last


def cpp_kernels(code):
    """The C++ sources of a compiled graph's fused kernels, in a stable order."""
    return sorted(re.findall(r"async_compile\.cpp_pybinding\((\[.*?\]), r'''(.*?)'''\)",
                             "\n".join(code), re.S))


# The CNN's case is slow (its backward compiles longest, ~18 s); tests/compile/test_conv_layout.py
# compiles CNN training in the default suite.
@pytest.mark.parametrize("model, make_input", [(MLP, mlp_input),
                                               (TransformerBlock, transformer_input),
                                               pytest.param(CNN, cnn_input,
                                                            marks=pytest.mark.slow)],
                         ids=["mlp", "transformer_block", "cnn"])
def test_training_graphs_compile_to_the_cpus_kernels(model, make_input):
    # Neuron's kernels come from the CPU's C++ backend and take its heuristics too
    # (inductor_cpu_paths.py): forward and backward kernels are the CPU's, character for
    # character, so compiled neuron computes what compiled CPU computes, bit for bit.
    torch.manual_seed(0)
    m, x = model(), make_input()
    kernels, outputs = {}, {}
    for device in ("cpu", "neuron"):
        torch._dynamo.reset()
        on_device = type(m)().to(device)
        on_device.load_state_dict(m.state_dict())
        fn = torch.compile(on_device, backend="neuron" if device == "neuron" else "inductor")

        def step():
            out = fn(x.to(device))
            out.square().mean().backward()
            return out

        outputs[device], code = run_and_get_code(step)
        kernels[device] = cpp_kernels(code)
    assert kernels["neuron"] and kernels["neuron"] == kernels["cpu"]
    torch.testing.assert_close(outputs["neuron"].cpu(), outputs["cpu"], rtol=0, atol=0)


def test_cnn_inference_compiles_to_the_cpus_kernels():
    # A convolution's bias stays inside oneDNN's convolution, as on the CPU, instead of being
    # peeled off into the next fused kernel as for GPUs (inductor_cpu_paths.py).
    torch.manual_seed(0)
    model, x = CNN().eval(), cnn_input()
    kernels, outputs, codes = {}, {}, {}
    for device in ("cpu", "neuron"):
        torch._dynamo.reset()
        fn = torch.compile(model.to(device), backend="neuron" if device == "neuron" else "inductor")
        with torch.no_grad():
            outputs[device], code = run_and_get_code(fn, x.to(device))
        kernels[device], codes[device] = cpp_kernels(code), code[0]
    assert kernels["neuron"] and kernels["neuron"] == kernels["cpu"]
    conv_calls = re.findall(r"extern_kernels\.convolution\((.*?)\)\n", codes["neuron"])
    assert len(conv_calls) == 2 and all(call.split(", ")[2].startswith("arg") for call in conv_calls)
    torch.testing.assert_close(outputs["neuron"].cpu(), outputs["cpu"], rtol=0, atol=0)
