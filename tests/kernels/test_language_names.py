"""Names public NKI kernels use: nki.dtype, nki.isa.constants, nl.shared_constant, NKIObject
arguments with attributes, neuronxcc.nki.typing annotations, nisa.tensor_copy(dtype=),
nisa.activation(op=nl.copy) and float32's lowest as a constant, against torch references."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki.isa.constants import dge_mode, oob_mode
from neuronxcc.nki.typing import scalar, tensor
from torchneuron.kernels.nki.errors import NkiTypeError
from tests.kernels.tiles import tile_in, tile_out

FP32_LOWEST = -3.4028235e38  # float32's lowest as kernels write it (a double just beyond it)


def test_nki_dtype_and_isa_constants():
    assert isinstance(nl.bfloat16, nki.dtype)
    assert oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode
    assert nisa.constants.engine is nisa.engine


def test_activation_copy_and_memset_lowest():
    @nki.jit
    def k(x):
        t = tile_in(x)
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=out, op=nl.copy, data=t, scale=2.0)
        low = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=low, value=FP32_LOWEST)
        return tile_out(out), tile_out(low)

    x = torch.randn(8, 16)
    out, low = k(x)
    torch.testing.assert_close(out, (x * 2).bfloat16())
    torch.testing.assert_close(low, torch.full((8, 16), torch.finfo(torch.float32).min))


def test_nl_copy_is_still_a_function():
    @nki.jit
    def k(x):
        return tile_out(nl.copy(tile_in(x), dtype=nl.float16))

    x = torch.randn(4, 8)
    torch.testing.assert_close(k(x), x.half())


def test_tensor_copy_dtype_rounds_through_it():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=tile_in(x), dtype=nl.bfloat16)
        return tile_out(out)

    x = torch.randn(8, 32)
    torch.testing.assert_close(k(x), x.bfloat16().float())


def test_shared_constant_from_numpy_and_npy_file(tmp_path):
    table = np.arange(24, dtype=np.float32).reshape(4, 6) / 7
    np.save(tmp_path / "c.npy", table.astype(np.int32))

    @nki.jit
    def k(x: tensor):
        c = nl.shared_constant(table)
        i = nl.shared_constant(str(tmp_path / "c.npy"), dtype=nl.int32)
        a = nl.ndarray((4, 6), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=c)
        b = nl.ndarray((4, 6), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=i)
        return tile_out(a), tile_out(b)

    a, b = k(torch.zeros(1))
    torch.testing.assert_close(a, torch.from_numpy(table))
    torch.testing.assert_close(b, torch.from_numpy(table.astype(np.int32)))


def test_shared_constant_refuses_float64_data():
    @nki.jit
    def k(x):
        nl.shared_constant(np.zeros((2, 2)))

    with pytest.raises(NkiTypeError, match="float64 is not an NKI data type"):
        k(torch.zeros(1))


@dataclass
class Weights(nl.NKIObject):
    gate: tensor
    up: tensor
    scale: float
    compute_dtype: nki.dtype = nl.bfloat16


def test_nki_objects_carry_tensors_and_settings_into_a_kernel():
    config = nl.NKIObject(offset=1.5, tile=8)
    assert config.offset == 1.5 and "tile=8" in repr(config)

    @nki.jit
    def k(w: Weights, cfg: nl.NKIObject, bias: scalar):
        g, u = tile_in(w.gate), tile_in(w.up)
        out = nl.ndarray(g.shape, w.compute_dtype, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=out, data=g, op0=nl.multiply, operand0=w.scale,
                                  op1=nl.add, operand1=u)
        nisa.tensor_scalar(dst=out, data=out, op0=nl.add, operand0=cfg.offset + bias)
        return tile_out(out)

    gate, up = torch.randn(8, 16), torch.randn(8, 16)
    w = Weights(gate.to("neuron"), up.to("neuron"), 3.0)
    out = k(w, config, 0.5).cpu()
    torch.testing.assert_close(out, ((gate * 3.0 + up).bfloat16().float() + 2.0).bfloat16())
    assert w.gate.device.type == "neuron"  # the caller's object is not changed


def test_neuronxcc_nki_is_the_same_language_with_the_legacy_index_api_refused():
    import neuronxcc.nki as legacy
    import neuronxcc.nki.isa as legacy_isa
    import neuronxcc.nki.language as legacy_nl
    from torchneuron.kernels.nki import NkiUnsupportedError
    assert legacy is nki and legacy_nl is nl and legacy_isa is nisa

    @legacy.jit
    def k(x):
        legacy_nl.mgrid[0:4, 0:4]

    with pytest.raises(NkiUnsupportedError, match=r"nl.mgrid belongs to the legacy "
                       r"neuronxcc.nki index API"):
        k(torch.zeros(1))


def test_collectives_run_as_rank_zero_of_one():
    import nki.collectives as ncc
    from nki.collectives import ReplicaGroup
    from torchneuron.kernels.nki import NkiUnsupportedError, NkiValidationError

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce([x], [out], ReplicaGroup([[ncc.rank_id()]]), nl.add)
        return out

    x = torch.randn(8, 16)
    torch.testing.assert_close(k(x), x)

    @nki.jit
    def two_ranks(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([x], [out], ReplicaGroup([[0, 1]]), collective_dim=0)

    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*\[\[0, 1\]\].*rank 0 "
                       r"of one"):
        two_ranks(x)

    @nki.jit
    def ring(x):
        ncc.collective_permute_implicit(x)

    with pytest.raises(NkiUnsupportedError, match="collective_permute_implicit"):
        ring(x)


def test_new_language_functions_match_torch():
    @nki.jit
    def k(x, w):
        t, wt = tile_in(x), tile_in(w)
        return (tile_out(nl.rms_norm(t, wt, axis=1, n=x.shape[1])),
                tile_out(nl.abs_max(t, wt)), tile_out(nl.tan(t)), tile_out(nl.trunc(t * 3.0)),
                tile_out(nl.gelu_apprx_sigmoid_dx(t)))

    x, w = torch.randn(16, 32), torch.randn(16, 32)
    rms, am, tan, tr, gdx = k(x, w)
    torch.testing.assert_close(rms, x * torch.rsqrt(x.square().mean(1, keepdim=True) + 1e-6) * w)
    torch.testing.assert_close(am, torch.maximum(x.abs(), w.abs()))
    torch.testing.assert_close(tan, torch.tan(x))
    torch.testing.assert_close(tr, torch.trunc(x * 3.0))
    xr = x.detach().requires_grad_()
    (xr * torch.sigmoid(1.702 * xr)).sum().backward()
    torch.testing.assert_close(gdx, xr.grad)
