"""nki_op: NKI kernels as PyTorch operators, in eager mode, under torch.compile(backend="neuron",
fullgraph=True), under autocast and in training, each against the CPU; and its clear errors."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torch_neuronx import nki_op
from torchneuron.kernels.nki import NkiValidationError


@nki.jit
def scale_add_kernel(a, b, alpha: float):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    for i in nl.affine_range((a.shape[0] + P - 1) // P):
        n = min(P, a.shape[0] - i * P)
        x, y = nl.load(a[i * P:i * P + n, :]), nl.load(b[i * P:i * P + n, :])
        r = nl.ndarray(x.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=r, data=x, op0=nl.multiply, operand0=alpha, op1=nl.add,
                                  operand1=y)
        nl.store(out[i * P:i * P + n, :], r)
    return out


@nki.jit
def add_into_kernel(acc, x):
    nl.store(acc, nl.load(acc) + nl.load(x))


@nki_op("nkitest::scale_add", mutates_args=())
def scale_add(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    return scale_add_kernel(a, b, alpha)


@nki_op("nkitest::add_into", mutates_args=("acc",))
def add_into(acc: torch.Tensor, x: torch.Tensor) -> None:
    add_into_kernel(acc, x)


def _backward(ctx, grad):
    return scale_add(grad, torch.zeros_like(grad), ctx.alpha), grad, None


def _setup(ctx, inputs, output):
    ctx.alpha = inputs[2]


scale_add.register_autograd(_backward, setup_context=_setup)


def test_is_a_torch_library_operator_with_a_schema_from_type_hints():
    assert str(torch.ops.nkitest.scale_add.default._schema) == \
        "nkitest::scale_add(Tensor a, Tensor b, float alpha) -> Tensor"


def test_eager():
    a, b = torch.randn(200, 64), torch.randn(200, 64)
    out = scale_add(a.to("neuron"), b.to("neuron"), 0.5)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), a * 0.5 + b)


def test_mutates_args():
    acc, x = torch.randn(16, 8), torch.randn(16, 8)
    acc_n = acc.to("neuron")
    add_into(acc_n, x.to("neuron"))
    torch.testing.assert_close(acc_n.cpu(), acc + x)


def test_torch_compile_fullgraph_one_node():
    graphs = []

    def count_graphs(gm, example_inputs):
        graphs.append(gm)
        from torchneuron.compile.backend import neuron_backend
        return neuron_backend(gm, example_inputs)

    def f(a, b):
        return torch.relu(scale_add(a, b, 2.0)) + 1

    a, b = torch.randn(128, 32), torch.randn(128, 32)
    compiled = torch.compile(f, backend=count_graphs, fullgraph=True)
    out = compiled(a.to("neuron"), b.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.relu(a * 2 + b) + 1)
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.nkitest.scale_add.default) == 1


def test_torch_compile_with_the_neuron_backend():
    a, b = torch.randn(64, 16), torch.randn(64, 16)
    compiled = torch.compile(lambda a, b: scale_add(a, b, 3.0) * 2, backend="neuron",
                             fullgraph=True)
    torch.testing.assert_close(compiled(a.to("neuron"), b.to("neuron")).cpu(), (a * 3 + b) * 2)


def test_a_rule_violation_fails_while_tracing_before_anything_runs():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with pytest.raises(NkiValidationError, match="sbuf-capacity"), FakeTensorMode():
        a = torch.empty(128, 60000, device="neuron")  # a (128, 60000) fp32 tile: 240 KB each
        scale_add(a, a, 1.0)


def test_autocast_casts_floating_inputs_to_float32():
    a, b = torch.randn(32, 16), torch.randn(32, 16)
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = scale_add(a.to("neuron"), b.bfloat16().to("neuron"), 1.0)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), a + b.bfloat16().float())


def test_training_runs_the_backward_kernel():
    torch.manual_seed(0)
    a = torch.randn(40, 8, requires_grad=True)
    b = torch.randn(40, 8, requires_grad=True)
    an = a.detach().to("neuron").requires_grad_()
    bn = b.detach().to("neuron").requires_grad_()
    (scale_add(an, bn, 0.25) ** 2).sum().backward()
    ((a * 0.25 + b) ** 2).sum().backward()
    torch.testing.assert_close(an.grad.cpu(), a.grad)
    torch.testing.assert_close(bn.grad.cpu(), b.grad)


def test_a_training_loop_matches_the_cpu():
    target = torch.randn(64, 8)

    def train(device, forward):
        weight = torch.zeros(64, 8, device=device, requires_grad=True)
        bias = torch.zeros(64, 8, device=device, requires_grad=True)
        opt = torch.optim.SGD([weight, bias], lr=0.05)
        for _ in range(10):
            opt.zero_grad()
            loss = ((forward(weight, bias) - target.to(device)) ** 2).sum()
            loss.backward()
            opt.step()
        return weight.detach().cpu(), bias.detach().cpu(), loss.item()

    w, b, loss = train("neuron", lambda w, b: scale_add(w, b, 2.0))
    w_cpu, b_cpu, loss_cpu = train("cpu", lambda w, b: w * 2.0 + b)
    torch.testing.assert_close(w, w_cpu)
    torch.testing.assert_close(b, b_cpu)
    assert loss < 0.01 * (target ** 2).sum().item()


def test_wrong_device_is_a_clear_error():
    with pytest.raises(RuntimeError, match="argument 'a' is on cpu; NKI kernels run on neuron"):
        scale_add(torch.randn(4, 4), torch.randn(4, 4), 1.0)


def test_wrong_dtype_is_a_clear_error():
    a = torch.randn(4, 4).to("neuron")
    with pytest.raises(TypeError, match="float64 is not an NKI data type"):
        scale_add(a, torch.randn(4, 4, dtype=torch.float64).to("neuron"), 1.0)


def test_a_kernel_that_raises_names_the_kernel_and_the_op():
    @nki.jit
    def needs_2d(x):
        assert x.ndim == 2, f"expected a 2-D input, got {x.ndim}-D"
        return x

    @nki_op("nkitest::needs_2d", mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return needs_2d(x).clone()

    with pytest.raises(AssertionError, match="expected a 2-D input, got 3-D") as info:
        op(torch.randn(2, 2, 2).to("neuron"))
    notes = "".join(info.value.__notes__)
    assert "needs_2d" in notes and "nkitest::needs_2d" in notes


def test_missing_type_hints_are_a_clear_error():
    with pytest.raises(ValueError, match="type hints"):
        nki_op("nkitest::untyped", lambda x: x, mutates_args=())


def test_torch_export_sees_one_node():
    class Model(torch.nn.Module):
        def forward(self, a, b):
            return scale_add(a, b, 2.0) + 1

    a, b = torch.randn(64, 16), torch.randn(64, 16)
    exported = torch.export.export(Model(), (a.to("neuron"), b.to("neuron")))
    targets = [n.target for n in exported.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.nkitest.scale_add.default) == 1
    torch.testing.assert_close(exported.module()(a.to("neuron"), b.to("neuron")).cpu(),
                               a * 2 + b + 1)
