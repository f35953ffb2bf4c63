"""nl.ndarray(address=...): explicitly placed on-chip tensors, PSUM banks shared by address, and
the placement rules (address-range, address-align, address-overlap), against torch references."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError


def on(*xs):
    return [x.to("neuron") for x in xs]


def test_two_matmuls_share_one_psum_bank_by_address():
    """Two (128, 256) float32 accumulators in bank 3, at bytes 0 and 1024 of it (AWS's kernel
    library packs PSUM slots so): each holds its own product, and a third tensor placed over the
    whole bank sees both halves, because explicitly placed tensors share memory."""
    @nki.jit
    def k(aT, b, c):
        s = nl.ndarray(aT.shape, aT.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=aT)
        m1 = nl.ndarray(b.shape, b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m1, src=b)
        m2 = nl.ndarray(c.shape, c.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m2, src=c)
        bank = 3 * 2048
        p1 = nl.ndarray((128, 256), nl.float32, buffer=nl.psum, address=(0, bank))
        p2 = nl.ndarray((128, 256), nl.float32, buffer=nl.psum, address=(0, bank + 1024))
        nisa.nc_matmul(dst=p1, stationary=s, moving=m1)
        nisa.nc_matmul(dst=p2, stationary=s, moving=m2)
        whole = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, bank))
        res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=whole)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    aT, b, c = torch.randn(64, 128), torch.randn(64, 256), torch.randn(64, 256)
    out = k(*on(aT, b, c)).cpu()
    expected = torch.cat([aT.T @ b, aT.T @ c], dim=1)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_placed_sbuf_tensor_reused_for_another_shape_and_partition_offset():
    """A tile written as (64, 32) bf16 at partition 32 reads back through a (64, 16) float32
    tensor at the same address as the same bytes (a reinterpretation, as on the chip)."""
    @nki.jit
    def k(x):
        a = nl.ndarray((64, 32), nl.bfloat16, buffer=nl.sbuf, address=(32, 4096))
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray((64, 16), nl.float32, buffer=nl.sbuf, address=(32, 4096))
        out = nl.ndarray((64, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        return out

    x = torch.randn(64, 32).bfloat16()
    torch.testing.assert_close(k(x), x.view(torch.float32))


def test_automatic_tensors_avoid_placed_ones():
    @nki.jit
    def k(x):
        placed = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, 0))
        auto = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.memset(dst=placed, value=1.0)
        nisa.memset(dst=auto, value=2.0)
        res = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=placed)
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    torch.testing.assert_close(k(torch.zeros(1)), torch.ones(128, 512))


def expect(rule, body, match):
    with pytest.raises(NkiValidationError, match=rf"\[{rule}\].*{match}"):
        nki.jit(body)(torch.zeros(1))


def test_address_outside_the_memory_is_refused():
    expect("address-range",
           lambda x: nl.ndarray((128, 512), nl.float32, buffer=nl.psum, address=(0, 15360),
                                name="acc"),
           r"'acc' \(psum, shape \(128, 512\), float32\).*bytes 15360..17407.*16384 bytes")
    expect("address-range",
           lambda x: nl.ndarray((64, 8), nl.float32, buffer=nl.sbuf, address=(96, 0)),
           r"partitions 96..159.*128 partitions")
    expect("address-range",
           lambda x: nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm, address=(0, 0)),
           r"HBM tensors have none")
    expect("address-range",
           lambda x: nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf, address=7),
           r"must be \(partition_offset, free_offset_in_bytes\)")


def test_misaligned_address_is_refused():
    expect("address-align",
           lambda x: nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf, address=(0, 6), name="t"),
           r"'t' \(sbuf, shape \(4, 4\), float32\).*free offset 6 bytes")


def test_address_overlapping_a_compiler_placed_tensor_is_refused():
    def body(x):
        auto = nl.ndarray((128, 512), nl.float32, buffer=nl.psum, name="auto")  # bank 0
        nl.ndarray((128, 256), nl.float32, buffer=nl.psum, address=(0, 1024), name="mine")
        return auto

    expect("address-overlap", body,
           r"'mine' \(psum, shape \(128, 256\), float32\): bytes 1024..2047.*'auto' \(psum, "
           r"shape \(128, 512\), float32\)")
