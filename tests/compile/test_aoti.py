"""Programs exported on neuron reach deployment: AOTInductor packages
(`torch._inductor.aoti_compile_and_package` / `aoti_load_package`, torchneuron/compile/aoti.py)
and `torch.export.save` / `torch.export.load`.

Compiling a package takes 40-60 s on this machine's two shared cores, so every test that compiles
one is marked slow (run them with `make test-slow`); the default suite checks what neuron adds to
a package (its metadata), the refusals that come before compiling, and export's save/load."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn as nn
from compile_models import CNN, MLP, TransformerBlock, cnn_input, mlp_input, transformer_input

from torchneuron.compile import aoti


def mlp():
    return MLP(width=16)


BATCH = torch.export.Dim("batch", min=1, max=64)


def export_on_neuron(model, inputs, dynamic_shapes=None):
    return torch.export.export(copy.deepcopy(model).to("neuron"),
                               tuple(x.to("neuron") for x in inputs),
                               dynamic_shapes=dynamic_shapes)


# ---- what neuron adds to a package, and the refusals before compiling (fast)

def test_a_static_package_records_its_outputs_sizes():
    metadata = aoti.package_metadata(export_on_neuron(mlp(), (mlp_input(3),)))
    assert metadata[aoti.DEVICE_KEY] == "neuron"
    assert json.loads(metadata[aoti.OUTPUTS_KEY]) == [
        {"dtype": "float32", "sizes": [3, 8], "strides": [8, 1]}]
    assert json.loads(metadata[aoti.SYMBOLS_KEY]) == {}


def test_a_dynamic_batch_is_read_from_the_input():
    program = export_on_neuron(mlp(), (mlp_input(5),), ({0: BATCH},))
    metadata = aoti.package_metadata(program)
    (output,) = json.loads(metadata[aoti.OUTPUTS_KEY])
    symbols = json.loads(metadata[aoti.SYMBOLS_KEY])
    assert list(symbols.values()) == [[0, 0]]  # the batch: input 0, dimension 0
    assert output["sizes"] == [next(iter(symbols)), 8] and output["strides"] == [8, 1]


class _Positives(nn.Module):
    def forward(self, x):
        return x[x > 0]


def test_a_data_dependent_output_size_is_refused_before_compiling():
    program = export_on_neuron(_Positives(), (torch.randn(6),))
    with pytest.raises(NotImplementedError, match=r"output 0 has size .*not on the inputs' sizes "
                                                  r"\(a data-dependent output size\)"):
        torch._inductor.aoti_compile_and_package(program)


class _DoubledAndBatch(nn.Module):
    def forward(self, x):
        return x * 2, x.shape[0]


def test_a_non_tensor_output_is_refused_before_compiling():
    program = export_on_neuron(_DoubledAndBatch(), (mlp_input(4),), ({0: BATCH},))
    with pytest.raises(NotImplementedError, match=r"output 1 is SymInt, not a tensor; a neuron "
                                                  r"package returns tensors only"):
        torch._inductor.aoti_compile_and_package(program)


class _Doubled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("unused", torch.zeros(1))

    def forward(self, x):
        return x * 2


def test_a_program_mixing_devices_is_refused():
    model = _Doubled()  # its buffer stays on the CPU
    program = torch.export.export(model, (torch.randn(3, device="neuron"),))
    with pytest.raises(ValueError, match=r"mixes devices \(cpu, neuron:0\)"):
        torch._inductor.aoti_compile_and_package(program)


NO_HOST_ACCESS = (
    "import sys, torch, torchneuron\n"
    "from torchneuron._C import aten as _aten_c\n"
    "x = torch.randn(3, 8, device='neuron')\n"
    "program = torch.export.export(torch.nn.Linear(8, 4).to('neuron'), (x,))\n"
    "_aten_c.override_host_addressable_for_testing(False)\n"
    "try:\n"
    "    if sys.argv[1] == 'compile':\n"
    "        torch._inductor.aoti_compile_and_package(program)\n"
    "    else:\n"
    "        torch._inductor.aoti_load_package(sys.argv[1])\n"
    "except RuntimeError as e:\n"
    "    print('ERROR:', e)\n")


def test_a_runtime_without_host_memory_refuses_to_compile_a_package(python):
    out = python(NO_HOST_ACCESS, args=("compile",), timeout=300)
    assert "ERROR: neuron: an AOTInductor package of a neuron program (CPU code on neuron " \
           "memory) needs device memory that the CPU can address in place" in out.stdout, \
        out.stdout + out.stderr[-3000:]


def test_aot_compile_without_packaging_points_to_the_package():
    program = export_on_neuron(mlp(), (mlp_input(3),))
    with pytest.raises(Exception, match=r"does not support cpp_wrapper=True .* For a program "
                                        r"exported on neuron, torch._inductor."
                                        r"aoti_compile_and_package works"):
        torch._inductor.aot_compile(program.module(), (mlp_input(3).to("neuron"),))


def test_a_cpu_program_is_left_to_pytorch():
    assert aoti.program_device(torch.export.export(mlp(), (mlp_input(3),))) is None


# ---- torch.export.save / load (fast)

def test_export_save_load_round_trips_in_a_fresh_process(tmp_path, python):
    model = TransformerBlock().eval()
    x = transformer_input()
    program = export_on_neuron(model, (x,))
    torch.export.save(program, tmp_path / "block.pt2")
    loaded = torch.export.load(tmp_path / "block.pt2")
    assert {t.device for t in loaded.state_dict.values()} == {torch.device("neuron", 0)}
    with torch.no_grad():
        expected = model(x)
        torch.testing.assert_close(loaded.module()(x.to("neuron")).cpu(), expected)
        torch.testing.assert_close(program.module()(x.to("neuron")).cpu(), expected)
    torch.save({"x": x, "expected": expected}, tmp_path / "io.pt")
    out = python(
        "import sys, torch, torchneuron\n"
        "program = torch.export.load(sys.argv[1] + '/block.pt2')\n"
        "io = torch.load(sys.argv[1] + '/io.pt')\n"
        "y = program.module()(io['x'].to('neuron'))\n"
        "assert y.device.type == 'neuron', y.device\n"
        "torch.testing.assert_close(y.cpu(), io['expected'])\n"
        "print('ok')\n", args=(str(tmp_path),), timeout=300)
    assert out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# ---- packages (slow: each compiles with AOTInductor)

RUN_PACKAGE = (
    "import sys, time, torch, torchneuron\n"
    "io = torch.load(sys.argv[1] + '/io.pt')\n"
    "model = torch._inductor.aoti_load_package(sys.argv[1] + '/package.pt2')\n"
    "for x, expected in io:\n"
    "    y = model(*[t.to('neuron') for t in x])\n"
    "    assert y.device.type == 'neuron', y.device\n"
    "    torch.testing.assert_close(y.cpu(), expected)\n"
    "print('ok')\n")


def compile_package(model, inputs, path, dynamic_shapes=None):
    return torch._inductor.aoti_compile_and_package(
        export_on_neuron(model, inputs, dynamic_shapes), package_path=str(path))


def check_in_a_fresh_process(python, model, path, calls):
    """Runs the package at `path`/package.pt2 in a new process, on each of `calls` (tuples of
    inputs), against the CPU model."""
    with torch.no_grad():
        io = [(x, model(*x)) for x in calls]
    torch.save(io, path / "io.pt")
    out = python(RUN_PACKAGE, args=(str(path),), timeout=300)
    assert out.stdout.strip().endswith("ok"), out.stderr[-3000:]


@pytest.fixture(scope="module")
def mlp_package(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp")
    model = mlp()
    compile_package(model, (mlp_input(3),), path / "package.pt2")
    return model, path


@pytest.mark.slow
def test_an_mlp_package_runs_on_neuron_in_a_fresh_process(mlp_package, python):
    model, path = mlp_package
    check_in_a_fresh_process(python, model, path, [(mlp_input(3),)])


@pytest.mark.slow
def test_a_neuron_package_refuses_cpu_inputs(mlp_package):
    _, path = mlp_package
    model = torch._inductor.aoti_load_package(str(path / "package.pt2"))
    with pytest.raises(RuntimeError, match=r"compiled for neuron, but input 0 is on cpu"):
        model(mlp_input(3))
    # The device check comes before the package's own: two inputs on two neuron devices.
    with pytest.raises(RuntimeError, match=r"its inputs are on several neuron devices "
                                           r"\(neuron:0, neuron:1\); put them on one"):
        model.loader.boxed_run([mlp_input(3).to("neuron:0"), mlp_input(3).to("neuron:1")])


@pytest.mark.slow
def test_a_runtime_without_host_memory_refuses_to_load_a_package(mlp_package, python):
    _, path = mlp_package
    out = python(NO_HOST_ACCESS, args=(str(path / "package.pt2"),), timeout=300)
    assert "ERROR: neuron: running an AOTInductor package on neuron (CPU code on neuron " \
           "memory) needs device memory that the CPU can address in place" in out.stdout, \
        out.stdout + out.stderr[-3000:]


ORDERED_CALL = (
    "import sys, time, torch, torchneuron\n"
    "from torchneuron._C import launch as _launch_c\n"
    "io = torch.load(sys.argv[1] + '/io.pt')\n"
    "model = torch._inductor.aoti_load_package(sys.argv[1] + '/package.pt2')\n"
    "(x,), expected = io[0]\n"
    "xn = x.to('neuron')\n"
    # An op's first queued call runs synchronously (its recipe is checked), and an op on an idle
    # device inline: the two multiplications are first queued unmeasured, twice for the second.
    "for _ in range(2):\n"
    "    torch.neuron._sleep(50_000_000)\n"
    "    model(xn * 0.5 * 2)\n"
    "    torch.neuron.synchronize()\n"
    "torch.neuron._sleep(300_000_000)\n"  # 0.3 s of device time ahead of what follows
    "start = time.perf_counter()\n"
    "restored = xn * 0.5 * 2\n"  # queued behind the sleep; the package must read it after
    "before = _launch_c.queued_items()\n"
    "y = model(restored)\n"
    "after = _launch_c.queued_items()\n"
    "returned = time.perf_counter() - start\n"
    "torch.testing.assert_close(y.cpu(), expected)\n"
    "print(before, after, returned)\n")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["async", "fused"])
def test_a_call_is_one_item_after_the_queued_work(mlp_package, python, mode):
    model, path = mlp_package
    x = mlp_input(3)
    with torch.no_grad():
        torch.save([((x,), model(x))], path / "io.pt")
    out = python(ORDERED_CALL, env={"NEURON_EAGER_MODE": mode}, args=(str(path),), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    before, after, returned = out.stdout.split()[-3:]
    assert float(returned) < 0.3, "the call waited for the device instead of queuing"
    if mode == "async":  # fused mode holds the multiplications, so only async counts items
        assert int(after) == int(before) + 1, (before, after)


@pytest.mark.slow
def test_a_transformer_block_with_sdpa(tmp_path, python):
    model = TransformerBlock().eval()
    compile_package(model, (transformer_input(),), tmp_path / "package.pt2")
    check_in_a_fresh_process(python, model, tmp_path, [(transformer_input(),)])


@pytest.mark.slow
def test_a_convolution_net(tmp_path, python):
    model = CNN().eval()
    compile_package(model, (cnn_input(2),), tmp_path / "package.pt2")
    check_in_a_fresh_process(python, model, tmp_path, [(cnn_input(2),)])


@pytest.mark.slow
def test_a_dynamic_batch(tmp_path, python):
    model = mlp()
    compile_package(model, (mlp_input(5),), tmp_path / "package.pt2", ({0: BATCH},))
    check_in_a_fresh_process(python, model, tmp_path,
                             [(mlp_input(n),) for n in (1, 5, 11)])
