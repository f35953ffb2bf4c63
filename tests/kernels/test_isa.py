"""nki.isa and nki.language semantics against CPU references: float32 arithmetic with the cast
to dst.dtype, PSUM accumulation, scans, reductions, statistics, selection, registers, dtypes."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from tests.kernels.tiles import tile_in, tile_out


def on(*xs):
    return [x.to("neuron") for x in xs]


def test_tensor_scalar_two_operators_reversed_and_cast_to_bf16():
    @nki.jit
    def k(x, v):
        xs, vs = tile_in(x), tile_in(v)
        out = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out, data=xs, op0=nl.subtract, operand0=vs, reverse0=True,
                           op1=nl.multiply, operand1=3.0)
        return tile_out(out)
    x, v = torch.randn(16, 40), torch.randn(16, 1)
    torch.testing.assert_close(k(*on(x, v)).cpu(), ((v - x) * 3.0).bfloat16())


def test_scalar_tensor_tensor_and_tensor_tensor_ops():
    @nki.jit
    def k(a, b):
        at, bt = tile_in(a), tile_in(b)
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=out, data=at, op0=nl.multiply, operand0=2.0,
                                  op1=nl.maximum, operand1=bt)
        m = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=m, data1=out, data2=bt, op=nl.subtract)
        return tile_out(m)
    a, b = torch.randn(8, 32), torch.randn(8, 32)
    torch.testing.assert_close(k(*on(a, b)).cpu(), torch.maximum(a * 2, b) - b)


def test_integer_tensor_tensor_is_exact_and_bitvec_works_on_bits():
    @nki.jit
    def k(a, b):
        at, bt = tile_in(a), tile_in(b)
        s = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=at, data2=bt, op=nl.add)
        x = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=x, data1=at, data2=bt, op=nl.bitwise_xor)
        return tile_out(s), tile_out(x)
    a = torch.randint(-2**30, 2**30, (4, 8), dtype=torch.int32)
    b = torch.randint(-2**30, 2**30, (4, 8), dtype=torch.int32)
    s, x = k(*on(a, b))
    torch.testing.assert_close(s.cpu(), a + b)
    torch.testing.assert_close(x.cpu(), a ^ b)


def test_tensor_tensor_scan_is_a_recurrence():
    @nki.jit
    def k(a, b):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(dst=out, data0=tile_in(a), data1=tile_in(b), initial=0.5,
                                op0=nl.multiply, op1=nl.add)
        return tile_out(out)
    a, b = torch.rand(4, 20), torch.randn(4, 20)
    expected, prev = torch.empty_like(a), torch.full((4,), 0.5)
    for i in range(20):
        prev = a[:, i] * prev + b[:, i]
        expected[:, i] = prev
    torch.testing.assert_close(k(*on(a, b)).cpu(), expected)


def test_activation_scale_bias_and_accumulating_registers():
    @nki.jit
    def k(x, bias):
        xt = tile_in(x)
        y = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
        half = x.shape[1] // 2
        nisa.activation(dst=y[:, :half], op=nl.tanh, data=xt[:, :half], scale=0.5,
                        bias=tile_in(bias), reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=y[:, half:], op=nl.tanh, data=xt[:, half:], scale=0.5,
                        bias=tile_in(bias), reduce_res=total, reduce_cmd=nisa.reduce_cmd.reduce)
        return tile_out(y), tile_out(total)
    x, bias = torch.randn(8, 64), torch.randn(8, 1)
    y, total = k(*on(x, bias))
    expected = torch.tanh(x * 0.5 + bias)
    torch.testing.assert_close(y.cpu(), expected)
    torch.testing.assert_close(total.cpu(), expected.sum(1, keepdim=True))


@pytest.mark.parametrize("op, reference", [(nl.add, torch.sum), (nl.maximum, torch.amax)])
def test_tensor_reduce_trailing_axes_with_negate(op, reference):
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], x.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=out, op=op, data=tile_in(x), axis=(2,), negate=True)
        return tile_out(out)
    x = torch.randn(8, 3, 16)
    torch.testing.assert_close(k(*on(x)).cpu(), -reference(x, dim=2))


def test_matmul_accumulate_modes():
    @nki.jit
    def k(a, b):
        at, bt = tile_in(a), tile_in(b)
        acc = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=at, moving=bt)  # first write overwrites (NaN fill)
        nisa.nc_matmul(dst=acc, stationary=at, moving=bt)  # then accumulates
        once = nl.ndarray((8, 16), nl.float32, buffer=nl.psum)
        nisa.memset(dst=once, value=5.0)
        nisa.nc_matmul(dst=once, stationary=at, moving=bt, accumulate=False)
        results = []
        for p in (acc, once):
            s = nl.ndarray(p.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=p)
            results.append(tile_out(s))
        return results
    a, b = torch.randn(32, 8), torch.randn(32, 16)
    twice, once = k(*on(a, b))
    torch.testing.assert_close(twice.cpu(), 2 * (a.T @ b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(once.cpu(), a.T @ b, rtol=1e-5, atol=1e-5)


def test_fp8_double_row_matmul():
    @nki.jit
    def k(s, m):
        acc = nl.ndarray((s.shape[2], m.shape[2]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=tile_in(s), moving=tile_in(m),
                       perf_mode=nisa.matmul_perf_mode.double_row)
        out = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=acc)
        return tile_out(out)
    s = torch.randn(64, 2, 16).to(torch.float8_e5m2)
    m = torch.randn(64, 2, 32).to(torch.float8_e5m2)
    expected = s.float().reshape(128, 16).T @ m.float().reshape(128, 32)
    torch.testing.assert_close(k(*on(s, m)).cpu(), expected, rtol=1e-5, atol=1e-4)


def test_bn_stats_and_aggr_give_mean_and_variance():
    @nki.jit
    def k(x):
        xt = tile_in(x)
        stats = nl.ndarray((x.shape[0], 12), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats[:, 0:6], data=xt[:, 0:300])
        nisa.bn_stats(dst=stats[:, 6:12], data=xt[:, 300:])
        mv = nl.ndarray((x.shape[0], 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        return tile_out(mv)
    x = torch.randn(16, 500)
    expected = torch.stack([x.mean(1), x.var(1, unbiased=False)], dim=1)
    torch.testing.assert_close(k(*on(x)).cpu(), expected, rtol=1e-4, atol=1e-5)


def test_iota_and_affine_select():
    @nki.jit
    def k(x):
        idx = nl.ndarray((8, 12), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[3, 4], [1, 3]], offset=2, channel_multiplier=100)
        sel = nl.ndarray((8, 12), nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=sel, pattern=[[-1, 12]], channel_multiplier=1,
                           on_true_tile=tile_in(x), on_false_value=-1.0,
                           cmp_op=nl.greater_equal)
        return tile_out(idx), tile_out(sel)
    x = torch.randn(8, 12)
    idx, sel = k(*on(x))
    p, j = torch.arange(8)[:, None], torch.arange(12)[None, :]
    torch.testing.assert_close(idx.cpu(), (2 + 100 * p + 3 * (j // 3) + j % 3).int())
    torch.testing.assert_close(sel.cpu(), torch.where(p - j >= 0, x, torch.tensor(-1.0)))


def test_max8_partition_reduce_predicated_copy_and_transpose():
    @nki.jit
    def k(x, pred):
        xt = tile_in(x)
        top = nl.ndarray((x.shape[0], 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=top, src=xt)
        col = nl.ndarray((1, x.shape[1]), nl.float32, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=col, op=nl.add, data=xt)
        sel = nl.zeros(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy_predicated(dst=sel, src=xt, predicate=tile_in(pred))
        tr = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=tr, data=xt, engine=nisa.engine.vector)
        return tile_out(top), tile_out(col), tile_out(sel), tile_out(tr)
    x = torch.randn(16, 24)
    pred = (torch.rand(16, 24) > 0.5).to(torch.uint8)
    top, col, sel, tr = k(*on(x, pred))
    torch.testing.assert_close(top.cpu(), x.topk(8, dim=1).values)
    torch.testing.assert_close(col.cpu(), x.sum(0, keepdim=True))
    torch.testing.assert_close(sel.cpu(), torch.where(pred.bool(), x, torch.tensor(0.0)))
    torch.testing.assert_close(tr.cpu(), x.T)


def test_dma_casts_through_float32_and_transposes():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        tt = nl.ndarray((x.shape[1], x.shape[0]), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=tt, src=x)
        return tile_out(t), tile_out(tt)
    x = torch.randn(16, 32)
    cast, tr = k(*on(x))
    torch.testing.assert_close(cast.cpu(), x.bfloat16())
    torch.testing.assert_close(tr.cpu(), x.T)


def test_float8_e4m3_rounds_to_the_ieee_style_format():
    from torchneuron.kernels.nki import dtypes as dt
    values = torch.tensor([0.0, 1.0, 1.0625, 1.1875, 240.0, 247.0, 248.0, -300.0, 2.0 ** -9,
                           2.0 ** -10, float("nan")])
    decoded = dt.to_float32(dt.from_float32(values, dt.float8_e4m3), dt.float8_e4m3)
    expected = torch.tensor([0.0, 1.0, 1.0, 1.25, 240.0, 240.0, float("inf"), float("-inf"),
                             2.0 ** -9, 0.0, float("nan")])
    torch.testing.assert_close(decoded, expected, equal_nan=True)


def test_float_to_int_casts_round_half_even_and_saturate():
    from torchneuron.kernels.nki import dtypes as dt
    values = torch.tensor([0.5, 1.5, -2.5, 300.0, -300.0, float("nan")])
    torch.testing.assert_close(dt.from_float32(values, dt.int8),
                               torch.tensor([0, 2, -2, 127, -128, 0], dtype=torch.int8))


def test_type_promotion_follows_the_documented_table():
    from torchneuron.kernels.nki import dtypes as dt
    assert dt.promote(dt.float16, dt.bfloat16) is dt.float32
    assert dt.promote(dt.float8_e4m3, dt.float8_e5m2) is dt.bfloat16
    assert dt.promote(dt.int8, dt.uint8) is dt.int16
    assert dt.promote(dt.int32, dt.uint32) is dt.float32
    assert dt.promote(dt.int32, dt.float16) is dt.float16


def test_language_operators_and_reductions():
    @nki.jit
    def k(x, y):
        a, b = nl.load(x), nl.load(y)
        z = nl.maximum(a * 2.0 - b, nl.exp(b)) / (nl.abs(a) + 1.0)
        s = nl.sum(z, axis=1, keepdims=True)
        out = nl.ndarray(z.shape, z.dtype, buffer=nl.shared_hbm)
        nl.store(out, z)
        return out, tile_out(s)
    x, y = torch.randn(8, 16), torch.randn(8, 16)
    z, s = k(*on(x, y))
    expected = torch.maximum(x * 2 - y, torch.exp(y)) / (x.abs() + 1)
    torch.testing.assert_close(z.cpu(), expected)
    torch.testing.assert_close(s.cpu(), expected.sum(1, keepdim=True))


def test_matmul_and_transpose_of_the_language():
    @nki.jit
    def k(x, y):
        p = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)
        t = nl.transpose(nl.load(y))
        return tile_out(nl.copy(p)), tile_out(nl.copy(t))
    x, y = torch.randn(32, 16), torch.randn(32, 24)
    p, t = k(*on(x, y))
    torch.testing.assert_close(p.cpu(), x.T @ y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(t.cpu(), y.T)


def test_new_memory_reads_as_nan():
    @nki.jit
    def k(x):
        return nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    assert torch.isnan(k(torch.zeros(4, 4, device="neuron")).cpu()).all()


def test_in_place_kernel_writes_its_argument():
    @nki.jit
    def k(x):
        t = nl.load(x)
        nl.store(x, t * 3.0)
    x = torch.randn(8, 8)
    xn = x.to("neuron")
    k(xn)
    torch.testing.assert_close(xn.cpu(), x * 3)


def test_registers_and_dynamic_range():
    @nki.jit
    def k(count):
        reg = nisa.register_alloc()
        nisa.register_load(reg, nl.load(count))
        acc = nl.zeros((1, 1), nl.float32, buffer=nl.sbuf)
        for _ in nl.dynamic_range(reg):
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_store(out, reg)
        return tile_out(acc), tile_out(out)
    acc, out = k(torch.tensor([[5]], dtype=torch.int32, device="neuron"))
    assert acc.cpu().item() == 5.0 and out.cpu().item() == 5


def test_device_print_prints_values(capsys):
    @nki.jit
    def k(x):
        nl.device_print("my tile", nl.load(x))
    k(torch.arange(4, dtype=torch.float32).reshape(2, 2))
    printed = capsys.readouterr().out
    assert "my tile" in printed and "3." in printed


def test_views_share_storage():
    @nki.jit
    def k(x):
        t = nl.ndarray((4, 6), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        nisa.memset(dst=t.reshape((4, 2, 3))[:, 1, :], value=1.0)
        nisa.memset(dst=t[1, 0:2], value=2.0)
        return tile_out(t)
    expected = torch.zeros(4, 6)
    expected[:, 3:] = 1.0
    expected[1, 0:2] = 2.0
    torch.testing.assert_close(k(torch.zeros(1)), expected)


def test_simulate_runs_plain_functions_on_numpy():
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x) + 1.0)
        return out
    x = np.ones((4, 4), dtype=np.float32)
    np.testing.assert_array_equal(nki.simulate(k)(x), x + 1)


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, {}),
                                              (torch.bfloat16, {"rtol": 2e-2, "atol": 2e-1})])
def test_nl_matmul_without_transpose_x_inserts_the_documented_transpose(dtype, tolerance):
    # AWS's own examples call nl.matmul(x, y) with x as (M, K): x @ y.
    @nki.jit
    def k(a, b):
        p = nl.matmul(nl.load(a), nl.load(b))
        o = nl.ndarray(p.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=p)
        out = nl.ndarray(p.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=o)
        return out

    a, b = torch.randn(96, 128, dtype=dtype), torch.randn(128, 300, dtype=dtype)
    torch.testing.assert_close(k(a.to("neuron"), b.to("neuron")).cpu(), a.float() @ b.float(),
                               **tolerance)
