"""Every hardware rule the software NeuronCore enforces fails with an error naming the rule, the
buffer and the shapes, before the offending instruction runs; a failing kernel leaves its
arguments untouched."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiUnsupportedError, NkiValidationError
from torchneuron.kernels.nki.errors import NkiTypeError


def run(body, *args, target=None):
    """Runs `body(*args)` as a kernel on CPU tensors (rules do not depend on the device)."""
    kernel = nki.jit(body, platform_target=target) if target else nki.jit(body)
    return kernel(*(args or (torch.zeros(4, 4),)))


def expect(rule, body, *args, match=None, target=None):
    with pytest.raises(NkiValidationError, match=rf"\[{rule}\]{'.*' + match if match else ''}"):
        run(body, *args, target=target)


def sb(shape, dtype=nl.float32, name=""):
    return nl.ndarray(shape, dtype, buffer=nl.sbuf, name=name)


def ps(shape, dtype=nl.float32):
    return nl.ndarray(shape, dtype, buffer=nl.psum)


# ---- allocation --------------------------------------------------------------------------------

def test_partition_dimension_at_most_128():
    expect("partition-dim", lambda x: sb((256, 512), name="tile"),
           match=r"'tile' \(sbuf, shape \(256, 512\), float32\).*128 partitions")


def test_sbuf_capacity_counts_live_tiles_per_partition():
    def body(x):
        live = [sb((128, 16 * 1024)) for _ in range(3)]  # 3 x 64 KiB of 224 KiB
        return live, sb((128, 16 * 1024))
    expect("sbuf-capacity", body, match="229376 bytes")


def test_sbuf_capacity_is_freed_with_the_tile():
    def body(x):
        for _ in range(10):  # each 64 KiB tile dies before the next is allocated
            sb((128, 16 * 1024))
    run(body)


def test_trn3_has_more_sbuf():
    def body(x):
        keep = [sb((128, 16 * 1024)) for _ in range(3)]
        keep.append(sb((128, 12 * 1024)))  # 240 KiB: too much for trn2, fits trn3's 256 KiB
    expect("sbuf-capacity", body)
    run(body, target="trn3")


def test_psum_capacity_is_eight_banks():
    def body(x):
        live = [ps((128, 512)) for _ in range(8)]
        return live, ps((128, 1))
    expect("psum-capacity", body, match="8 banks")


def test_psum_tile_larger_than_psum():
    expect("psum-tile", lambda x: ps((128, 4097)))


def test_shape_must_be_positive():
    expect("shape", lambda x: sb((128, 0)))


# ---- memories ------------------------------------------------------------------------------------

def test_dma_cannot_reach_psum():
    def body(x):
        p = ps((4, 4))
        nisa.dma_copy(dst=p, src=x)
    expect("memory-access", body, match="dma_copy: dst .*psum")


def test_compute_engines_cannot_read_hbm():
    def body(x):
        nisa.tensor_tensor(dst=sb((4, 4)), data1=x, data2=x, op=nl.add)
    expect("memory-access", body, match="data1 .*HBM")


def test_matmul_reads_sbuf_and_writes_psum():
    def body(x):
        nisa.nc_matmul(dst=sb((4, 4)), stationary=sb((4, 4)), moving=sb((4, 4)))
    expect("memory-access", body, match="dst .*PSUM")


def test_two_psum_operands():
    def body(x):
        nisa.tensor_tensor(dst=sb((4, 4)), data1=ps((4, 4)), data2=ps((4, 4)), op=nl.add)
    expect("psum-operands", body)


def test_gpsimd_cannot_reach_psum():
    def body(x):
        nisa.tensor_copy(dst=sb((4, 4)), src=ps((4, 4)), engine=nisa.engine.gpsimd)
    expect("gpsimd-psum", body)


def test_power_runs_on_gpsimd_so_no_psum():
    def body(x):
        nisa.tensor_tensor(dst=ps((4, 4)), data1=sb((4, 4)), data2=sb((4, 4)), op=nl.power)
    expect("gpsimd-psum", body)


def test_kernel_returns_hbm_only():
    def body(x):
        return sb((4, 4))
    expect("kernel-output", body)


def test_nl_load_reads_hbm():
    expect("memory-access", lambda x: nl.load(sb((4, 4))))


# ---- matmul --------------------------------------------------------------------------------------

def _matmul(k, m, n, s_dtype=nl.float32, m_dtype=nl.float32, d_dtype=nl.float32, dst=None):
    def body(x):
        nisa.nc_matmul(dst=ps(dst or (m, n), d_dtype), stationary=sb((k, m), s_dtype),
                       moving=sb((k, n), m_dtype))
    return body


def test_matmul_stationary_free_size():
    expect("matmul-stationary", _matmul(128, 129, 512, dst=(128, 512)))


def test_matmul_moving_free_size_on_trn2_and_trn3():
    expect("matmul-moving", _matmul(128, 128, 1024), match="at most 512 on trn2")
    run(_matmul(128, 128, 1024), target="trn3")
    expect("matmul-moving", _matmul(128, 128, 4608, dst=(128, 4096)), target="trn3")


def test_matmul_contraction_must_match():
    def body(x):
        nisa.nc_matmul(dst=ps((4, 4)), stationary=sb((8, 4)), moving=sb((4, 4)))
    expect("matmul-contraction", body)


def test_matmul_dst_shape():
    def body(x):
        nisa.nc_matmul(dst=ps((4, 8)), stationary=sb((8, 4)), moving=sb((8, 4)))
    expect("matmul-dst-shape", body, match=r"must be \(4, 4\)")


def test_matmul_dtypes():
    expect("matmul-dtype", _matmul(4, 4, 4, nl.int32, nl.int32))
    expect("matmul-dtype", _matmul(4, 4, 4, nl.float32, nl.bfloat16), match="float32/tfloat32")
    expect("matmul-dtype", _matmul(4, 4, 4, nl.bfloat16, nl.bfloat16, nl.bfloat16))
    run(_matmul(4, 4, 4, nl.bfloat16, nl.bfloat16, nl.bfloat16), target="trn3")
    expect("matmul-dtype", _matmul(4, 4, 4, nl.float8_e4m3fn, nl.float8_e4m3fn))


def test_matmul_output_stays_in_one_psum_bank_on_trn2():
    def body(x):
        p = ps((128, 1024))
        nisa.nc_matmul(dst=p[:, 256:768], stationary=sb((128, 128)), moving=sb((128, 512)))
    expect("psum-bank", body, match="bank boundary")


def test_matmul_tiling_arguments():
    def body(x):
        nisa.nc_matmul(dst=ps((4, 4)), stationary=sb((4, 4)), moving=sb((4, 4)),
                       tile_position=(0, 0))
    expect("matmul-tiling", body)


def test_double_row_needs_fp8_pairs():
    def body(x):
        nisa.nc_matmul(dst=ps((4, 8)), stationary=sb((4, 2, 4), nl.bfloat16),
                       moving=sb((4, 2, 8), nl.bfloat16),
                       perf_mode=nisa.matmul_perf_mode.double_row)
    expect("matmul-dtype", body)


# ---- shapes, views, operands ---------------------------------------------------------------------

def test_partitions_must_match():
    def body(x):
        nisa.tensor_copy(dst=sb((4, 4)), src=sb((8, 2)))
    expect("partition-mismatch", body)


def test_elements_per_partition_must_match():
    def body(x):
        nisa.tensor_tensor(dst=sb((4, 4)), data1=sb((4, 4)), data2=sb((4, 8)), op=nl.add)
    expect("free-size-mismatch", body)


def test_index_out_of_bounds():
    expect("index-bounds", lambda x: sb((128, 4))[0:256, :])


def test_no_stride_across_partitions():
    expect("partition-stride", lambda x: sb((128, 4))[::2, :])


def test_reshape_keeps_partitions_and_needs_contiguity():
    expect("reshape", lambda x: sb((128, 4)).reshape((64, 8)))
    expect("reshape", lambda x: sb((4, 2, 3)).permute((0, 2, 1)).reshape((4, 6)))


def test_partition_dim_cannot_be_permuted_or_broadcast_as_a_view():
    expect("partition-dim", lambda x: sb((4, 2, 3)).permute((1, 0, 2)))
    expect("partition-broadcast", lambda x: sb((1, 4)).broadcast(0, 128))


def test_writes_to_a_broadcast_view_are_refused():
    def body(x):
        nisa.memset(dst=sb((4, 1)).broadcast(1, 8), value=0.0)
    expect("broadcast-write", body)


def test_tensor_scalar_operand_shape_and_dtype():
    def body(x):
        nisa.tensor_scalar(dst=sb((4, 4)), data=sb((4, 4)), op0=nl.add, operand0=sb((4, 2)))
    expect("operand-shape", body)

    def body2(x):
        nisa.tensor_scalar(dst=sb((4, 4)), data=sb((4, 4)), op0=nl.add,
                           operand0=sb((4, 1), nl.bfloat16))
    expect("operand-dtype", body2)


def test_bitvec_operators_need_integers():
    def body(x):
        nisa.tensor_tensor(dst=sb((4, 4)), data1=sb((4, 4)), data2=sb((4, 4)),
                           op=nl.bitwise_and)
    expect("operand-dtype", body)


def test_reductions_run_on_free_axes():
    def body(x):
        nisa.tensor_reduce(dst=sb((1, 4)), op=nl.add, data=sb((4, 4)), axis=0)
    expect("partition-reduce", body)

    def body2(x):
        nisa.tensor_reduce(dst=sb((4, 3)), op=nl.add, data=sb((4, 2, 3)), axis=1)
    expect("reduce-axes", body2)
    expect("partition-reduce", lambda x: nl.sum(sb((4, 4)), axis=0))


def test_bn_stats_free_size():
    def body(x):
        nisa.bn_stats(dst=sb((4, 6)), data=sb((4, 1024)))
    expect("bn-stats-size", body)


def test_transpose_sizes_per_engine():
    def body(x):
        nisa.nc_transpose(dst=sb((64, 64)), data=sb((64, 64)), engine=nisa.engine.vector)
    expect("transpose-size", body)


def test_instructions_of_newer_neuroncores():
    def body(x):
        nisa.exponential(dst=sb((4, 4)), src=sb((4, 4)))
    expect("architecture", body)
    run(body, target="trn3")


def test_activation_function_must_be_one():
    def body(x):
        nisa.activation(dst=sb((4, 4)), op=nl.add, data=sb((4, 4)))
    expect("operator", body)


# ---- refusals and argument checks -----------------------------------------------------------------

def test_unsupported_instructions_name_themselves():
    with pytest.raises(NkiUnsupportedError, match="nki.isa.nc_matmul_mx"):
        run(lambda x: nisa.nc_matmul_mx(None, None, None, None, None))


def test_legacy_index_api_is_refused_with_the_reason():
    with pytest.raises(NkiUnsupportedError, match="legacy neuronxcc.nki"):
        run(lambda x: nl.mgrid[0:128, 0:4])
    with pytest.raises(NkiUnsupportedError, match="mask"):
        run(lambda x: nl.exp(sb((4, 4)), mask=None))


def test_float64_and_int64_are_not_nki_dtypes():
    with pytest.raises(NkiTypeError, match="float64 is not an NKI data type"):
        run(lambda x: None, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(NkiTypeError, match="int64"):
        run(lambda x: sb((4, 4), torch.int64))


def test_mixing_devices_is_refused():
    with pytest.raises(RuntimeError, match="same device.*cpu.*neuron"):
        run(lambda a, b: None, torch.zeros(4), torch.zeros(4, device="neuron"))


def test_nki_apis_outside_a_kernel():
    from torchneuron.kernels.nki import NkiError
    with pytest.raises(NkiError, match="only inside a kernel"):
        nl.ndarray((4, 4), nl.float32)


def test_a_failing_kernel_leaves_its_arguments_untouched():
    @nki.jit
    def body(x):
        t = sb((4, 4))
        nisa.memset(dst=t, value=7.0)
        nisa.dma_copy(dst=x, src=t)  # writes the argument ...
        sb((256, 4))  # ... then breaks a rule
    x = torch.zeros(4, 4, device="neuron")
    with pytest.raises(NkiValidationError, match="partition-dim") as info:
        body(x)
    torch.testing.assert_close(x.cpu(), torch.zeros(4, 4))
    assert "in NKI kernel" in "".join(getattr(info.value, "__notes__", []))


def _dma_size(x):
    nisa.dma_copy(dst=sb((4, 4)), src=sb((4, 8)))


def _dma_mode(x):
    nisa.dma_copy(dst=sb((4, 4)), src=x, engine=nisa.engine.sync)


def _transpose_shape(x):
    nisa.nc_transpose(dst=ps((4, 8)), data=sb((4, 8)))


def _pattern(x):
    nisa.iota(dst=sb((4, 8)), pattern=[[1, 5]])


def _register(x):
    for i in nl.dynamic_range(2):
        pass
    reg = nisa.register_alloc(3)
    nisa.register_load(reg, sb((2, 2), nl.int32))


@pytest.mark.parametrize("rule, body", [
    ("dma-size", _dma_size),
    ("dma-mode", _dma_mode),
    ("transpose-shape", _transpose_shape),
    ("pattern", _pattern),
    ("operand-shape", _register),
    ("operand-type", lambda x: nisa.tensor_scalar(dst=sb((4, 4)), data=sb((4, 4)),
                                                  op0=nl.add, operand0="one")),
    ("operand-type", lambda x: nisa.tensor_tensor(dst=sb((4, 4)), data1=[1], data2=sb((4, 4)),
                                                  op=nl.add)),
    ("index", lambda x: sb((4, 8))[:, ::-1]),
    ("view", lambda x: sb((4, 3), nl.uint8).view(nl.int32)),
    ("squeeze", lambda x: sb((4, 2, 3)).squeeze_dim(1)),
    ("permute", lambda x: sb((4, 2, 3)).permute((0, 1, 1))),
    ("broadcast", lambda x: sb((4, 2)).broadcast(1, 8)),
    ("matmul-contraction", lambda x: nl.matmul(sb((4, 8)), sb((4, 4)))),
])
def test_the_other_rules(rule, body):
    expect(rule, body)
