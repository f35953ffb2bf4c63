"""nisa.activate2 (NeuronCore-v4) and the operators of the newest reference (nl.bypass,
nl.prelu, nl.mod, nl.average) against torch references, and the rules they bring."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError
from torchneuron.kernels.nki.errors import NkiTypeError
from tests.kernels.tiles import tile_in, tile_out


def test_activate2_fuses_the_online_softmax_correction():
    """exp(running_max - m_new) in one instruction, as AWS's attention kernels call it:
    op0=subtract with reverse0, op1=bypass, and the row sums reduced in the registers."""
    @nki.jit(platform_target="trn3")
    def k(x, m):
        xs, ms = tile_in(x), tile_in(m)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=out, op=nl.exp, data=xs, imm0=ms, imm1=0.0, op0=nl.subtract,
                       op1=nl.bypass, reverse0=True, reduce_op=nl.add, reduce_res=sums,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return tile_out(out), tile_out(sums)

    x, m = torch.randn(64, 48), torch.randn(64, 1)
    out, sums = k(x, m)
    ref = torch.exp(m - x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(sums, ref.sum(dim=1, keepdim=True))


@pytest.mark.parametrize("pair", [("multiply", "add"), ("multiply", "subtract"),
                                  ("multiply", "bypass"), ("add", "bypass"),
                                  ("subtract", "bypass"), ("bypass", "bypass")])
def test_activate2_tensor_scalar_pairs_then_prelu(pair):
    @nki.jit(platform_target="trn3")
    def k(x):
        xs = tile_in(x)
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=out, op=nl.prelu, data=xs, imm0=1.5, imm1=0.25,
                       op0=getattr(nl, pair[0]), op1=getattr(nl, pair[1]), relu_param=0.1,
                       reverse1=True)
        return tile_out(out)

    x = torch.randn(16, 20)
    torch_ops = {"multiply": torch.mul, "add": torch.add, "subtract": torch.sub,
                 "bypass": lambda a, b: a}
    t = torch_ops[pair[0]](x, torch.tensor(1.5))
    t = t if pair[1] == "bypass" else torch_ops[pair[1]](torch.tensor(0.25), t)
    ref = torch.nn.functional.leaky_relu(t, 0.1)
    torch.testing.assert_close(k(x), ref)


def test_activate2_accumulates_a_max_across_calls():
    @nki.jit(platform_target="trn3")
    def k(x):
        a, b = tile_in(x[:, 0:16]), tile_in(x[:, 16:32])
        out = nl.ndarray((x.shape[0], 16), nl.bfloat16, buffer=nl.sbuf)
        mx = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.activate2(dst=out, op=nl.bypass, data=a, imm0=2.0, imm1=0.0, op0=nl.multiply,
                       op1=nl.bypass, reduce_op=nl.maximum,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activate2(dst=out, op=nl.bypass, data=b, imm0=2.0, imm1=0.0, op0=nl.multiply,
                       op1=nl.bypass, reduce_op=nl.maximum, reduce_res=mx,
                       reduce_cmd=nisa.reduce_cmd.reduce)
        return tile_out(out), tile_out(mx)

    x = torch.randn(8, 32)
    out, mx = k(x)
    torch.testing.assert_close(out, (2 * x[:, 16:32]).bfloat16())
    torch.testing.assert_close(mx, (2 * x).amax(dim=1, keepdim=True))


def test_activate2_rules():
    def body(op0=nl.add, op1=nl.add, op=nl.exp, imm0=1.0):
        def kernel(x):
            t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
            nisa.activate2(dst=t, op=op, data=t, imm0=imm0, imm1=0.0, op0=op0, op1=op1)
        return kernel

    with pytest.raises(NkiValidationError, match=r"\[architecture\].*NeuronCore-v4"):
        nki.jit(body(nl.multiply, nl.add))(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[operator\].*\(op0, op1\) = \(nl.add, "
                       r"nl.add\) is not one of the documented pairs"):
        nki.jit(body(), platform_target="trn3")(torch.zeros(1))
    with pytest.raises(NkiValidationError, match=r"\[operator\].*op=nl.add is not an "
                       "activation"):
        nki.jit(body(nl.multiply, nl.add, op=nl.add), platform_target="trn3")(torch.zeros(1))

    def vector(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        v = nl.ndarray((4, 2), nl.float32, buffer=nl.sbuf, name="scale")
        nisa.activate2(dst=t, op=nl.exp, data=t, imm0=v, imm1=0.0, op0=nl.multiply,
                       op1=nl.add)

    with pytest.raises(NkiValidationError, match=r"\[operand-shape\].*imm0 'scale' \(sbuf, "
                       r"shape \(4, 2\), float32\) must be a scalar or a \(4, 1\) tile"):
        nki.jit(vector, platform_target="trn3")(torch.zeros(1))


def test_prelu_needs_activate2():
    def body(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=t, op=nl.prelu, data=t)

    with pytest.raises(NkiValidationError, match=r"op=nl.prelu takes its slope from "
                       "nisa.activate2's relu_param"):
        nki.jit(body)(torch.zeros(1))
    with pytest.raises(NkiTypeError, match="nl.prelu is an operator for nki.isa instructions"):
        nl.prelu(1.0)


def test_mod_average_and_bypass_as_alu_operators():
    @nki.jit
    def k(x, y):
        xs, ys = tile_in(x), tile_in(y)
        m = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        a = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=m, data1=xs, data2=ys, op=nl.mod)
        nisa.tensor_tensor(dst=a, data1=xs, data2=ys, op=nl.average)
        nisa.tensor_scalar(dst=b, data=xs, op0=nl.bypass, operand0=3.0)
        nisa.tensor_reduce(dst=r, data=xs, op=nl.average, axis=1)
        f = nl.fmod(xs, ys)
        return tile_out(m), tile_out(a), tile_out(b), tile_out(r), tile_out(f)

    x = torch.randn(8, 16) * 5
    y = torch.where(torch.rand(8, 16) > 0.5, 1.0, -1.0) * (torch.rand(8, 16) + 0.5)
    m, a, b, r, f = k(x, y)
    torch.testing.assert_close(m, torch.remainder(x, y))
    torch.testing.assert_close(a, (x + y) / 2)
    torch.testing.assert_close(b, x)
    torch.testing.assert_close(r, x.mean(dim=1, keepdim=True))
    torch.testing.assert_close(f, torch.fmod(x, y))
