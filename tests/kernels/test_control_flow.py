"""NKI 0.8's control flow on device values: nl.if_else and nl.while_loop with conditions the
kernel computes, nl.fori_loop with NkiScalar bounds, dynamic access patterns (a stride or count
read at run time), against torch references, and each of their rules."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiUnsupportedError, NkiValidationError


def load(x, engine=None):
    tile = nl.ndarray((1, 1), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    return nisa.scalar_load(tile, engine=engine)


def flag(value, dtype=np.int32):
    return np.array([[value]], dtype)


@nki.jit
def if_else_kernel(flag_in, data):
    """The nl.if_else page's example: +10 when flag > 0, else -10."""
    condition = load(flag_in) > 0
    result = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=result, src=data)

    def then_branch():
        nisa.tensor_scalar(result, result, op0=nl.add, operand0=10.0)

    def else_branch():
        nisa.tensor_scalar(result, result, op0=nl.subtract, operand0=10.0)

    nl.if_else(condition, then_branch, else_branch)
    out = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


@pytest.mark.parametrize("value", [5, 0, -3])
def test_if_else_branches_on_a_device_comparison(value):
    data = torch.randn(4, 8)
    out = if_else_kernel(torch.tensor([[value]], dtype=torch.int32).to("neuron"),
                         data.to("neuron"))
    torch.testing.assert_close(out.cpu(), data + 10 if value > 0 else data - 10)


@pytest.mark.parametrize("value,dtype,taken", [(-3, np.int32, "then"), (0, np.int32, "else"),
                                               (2**32 - 1, np.uint32, "then"),
                                               (0, np.uint32, "else")])
def test_any_nonzero_32_bit_scalar_selects_then(value, dtype, taken):
    @nki.jit
    def kernel(f):
        out = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nl.if_else(load(f), lambda: nisa.memset(dst=out, value=1),
                   lambda: nisa.memset(dst=out, value=2))
        result = nl.ndarray((1, 1), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=result, src=out)
        return result

    assert int(kernel(flag(value, dtype))[0, 0]) == (1 if taken == "then" else 2)


@pytest.mark.parametrize("cond,called", [(True, ["then"]), (False, ["else"]), (7, ["then"]),
                                         (0, ["else"])])
def test_a_python_condition_calls_only_the_selected_callback(cond, called):
    calls = []

    @nki.jit
    def kernel(x):
        nl.if_else(cond, lambda: calls.append("then"), lambda: calls.append("else"))
        return x

    kernel(torch.zeros(1))
    assert calls == called


def test_if_else_without_else_fn_does_nothing_when_false():
    calls = []

    @nki.jit
    def kernel(f):
        nl.if_else(load(f) != 0, lambda: calls.append("then"))
        return f

    kernel(flag(0))
    kernel(flag(4))
    assert calls == ["then"]


@pytest.mark.parametrize("call,match", [
    (lambda s: nl.if_else(1.0, lambda: None), r"cond=1\.0 must be an int"),
    (lambda s: nl.if_else(s, 3), r"then_fn=3 is not callable"),
    (lambda s: nl.if_else(s, lambda: None, "no"), r"else_fn='no' is not callable"),
    (lambda s: nl.if_else(s, lambda: 5), r"then_fn returned a value"),
    (lambda s: nl.if_else(s * 0, lambda: None, lambda: 5), r"else_fn returned a value"),
])
def test_if_else_rules(call, match):
    @nki.jit
    def kernel(f):
        call(load(f))
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*" + match):
        kernel(flag(1))


def test_if_else_refuses_a_condition_bound_to_one_sequencer():
    @nki.jit
    def kernel(f):
        nl.if_else(load(f, engine=nisa.engine.vector) > 0, lambda: None)
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*cond=.*bound to one "
                       "sequencer.*available on all engines"):
        kernel(flag(1))


@nki.jit
def countdown(data, count_input, as_comparison: bool = False):
    """acc += data, count times: while_loop with a device-loaded condition that the body
    counts down (r - 1, or the comparison r > 1 when it must run to 1)."""
    val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=data)
    acc = nl.zeros((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    steps = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=steps, value=0)
    count = load(count_input)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.scalar_store(steps, nisa.scalar_load(steps) + 1)
        if as_comparison:
            return (r > 1) * (r - 1)  # 0 once r reaches 1
        return r - 1

    nl.while_loop(count, body)
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("as_comparison", [False, True])
@pytest.mark.parametrize("n", [5, 1, 0])
def test_while_loop_runs_while_the_device_condition_is_nonzero(n, as_comparison):
    out = countdown(torch.tensor([[1.5]]).to("neuron"),
                    torch.tensor([[n]], dtype=torch.int32).to("neuron"), as_comparison)
    torch.testing.assert_close(out.cpu(), torch.tensor([[1.5 * n]]))


def test_while_loop_from_a_compile_time_int_gets_scalars_by_value():
    seen = []

    @nki.jit
    def kernel(x):
        def body(r):
            seen.append(r)
            return 0 if len(seen) == 3 else r - 2

        nl.while_loop(9, body)
        nl.while_loop(0, lambda r: seen.append("never"))
        return x

    kernel(torch.zeros(1))
    assert [r.dtype for r in seen] == [nl.int32] * 3
    assert [r.value for r in seen] == [9, 7, 5]


@pytest.mark.parametrize("init,body,match", [
    (lambda f: flag, lambda r: r, r"init=.* must be an int or an nl\.int32 NkiScalar"),
    (lambda f: True, lambda r: 0, r"init=True must be an int"),
    (lambda f: load(f) + 0, lambda r: None, r"body_fun returned None"),
    (lambda f: 2, lambda r: False, r"body_fun returned=False must be an int"),
    (lambda f: load(f), 4, r"body_fun=4 is not callable"),
])
def test_while_loop_rules(init, body, match):
    @nki.jit
    def kernel(f):
        nl.while_loop(init(f), body)
        return f

    with pytest.raises(NkiValidationError, match=match):
        kernel(flag(1))


@pytest.mark.parametrize("engine,dtype,match", [
    (None, np.uint32, r"must be a signed 32-bit \(nl\.int32\) scalar.*value != 0"),
    ("vector", np.int32, r"bound to one sequencer")])
def test_while_loop_condition_must_be_signed_and_on_all_engines(engine, dtype, match):
    @nki.jit
    def kernel(f):
        nl.while_loop(load(f, getattr(nisa.engine, engine) if engine else None), lambda r: 0)
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*" + match):
        kernel(flag(1, dtype))


def test_while_loop_refuses_an_unsigned_condition_from_the_body():
    @nki.jit
    def kernel(f):
        nl.while_loop(1, lambda r: load(f))
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*signed 32-bit"):
        kernel(flag(1, np.uint32))


@nki.jit
def copy_rows(table, n_input):
    """out[i] = table[i] for i < n (n read on the device), row by row through a scalar offset."""
    rows, d = table.shape
    out = nl.ndarray((rows, d), table.dtype, buffer=nl.shared_hbm)
    zero = nl.zeros((rows, d), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=out, src=zero)
    n = load(n_input)

    def body(i):
        row = nl.ndarray((1, d), table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=table.ap([[d, 1], [1, d]], 0, scalar_offset=i,
                                            indirect_dim=0))
        nisa.dma_copy(dst=out.ap([[d, 1], [1, d]], 0, scalar_offset=i, indirect_dim=0), src=row)

    nl.fori_loop(n - n + 1, n * 2 - n, body)  # bounds are scalar expressions
    return out


@pytest.mark.parametrize("n", [6, 1, 0])
def test_fori_loop_with_scalar_bounds_and_a_scalar_induction_variable(n):
    table = torch.randn(8, 4)
    out = copy_rows(table.to("neuron"), torch.tensor([[n]], dtype=torch.int32).to("neuron"))
    expected = torch.zeros(8, 4)
    expected[1:n] = table[1:n]
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("call,match", [
    (lambda s: nl.fori_loop(0, s, lambda i: None, unroll=True), r"unroll=True.*compile-time"),
    (lambda s: nl.fori_loop(0, 2, lambda i: None, unroll="yes"), r"unroll='yes' must be"),
    (lambda s: nl.fori_loop(0, 2, None), r"body_fun=None is not callable"),
    (lambda s: nl.fori_loop(s, 2, lambda i: None, step=s), r"step=.* compile-time positive"),
])
def test_fori_loop_rules(call, match):
    @nki.jit
    def kernel(f):
        call(load(f))
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*" + match):
        kernel(flag(1))


@pytest.mark.parametrize("engine,dtype,match", [
    (None, np.uint32, r"upper=.* must be a signed 32-bit"),
    ("gpsimd", np.int32, r"upper=.* bound to one sequencer")])
def test_fori_loop_bounds_are_signed_and_on_all_engines(engine, dtype, match):
    @nki.jit
    def kernel(f):
        nl.fori_loop(0, load(f, getattr(nisa.engine, engine) if engine else None),
                     lambda i: None)
        return f

    with pytest.raises(NkiValidationError, match=r"\[control-flow\].*" + match):
        kernel(flag(3, dtype))


def test_fori_loop_unroll_with_int_bounds_runs_the_same_loop():
    seen = []

    @nki.jit
    def kernel(x):
        nl.fori_loop(1, 7, lambda i: seen.append(i.value), step=2, unroll=True)
        return x

    kernel(torch.zeros(1))
    assert seen == [1, 3, 5]


def test_the_register_api_is_deprecated():
    @nki.jit
    def kernel(x):
        r = nisa.register_alloc(1)
        nisa.register_move(r, 2)
        return x

    with pytest.warns(DeprecationWarning, match=r"register_alloc is deprecated in NKI 0\.8"):
        kernel(torch.zeros(1))


# ---- dynamic access patterns: a stride or count read at run time --------------------------------

@nki.jit
def strided_rows(table, stride_input, count_input, rows: int, cols: int):
    """rows x cols elements of table (flat), row stride and column count read on the device."""
    stride, count = load(stride_input), load(count_input)
    tile = nl.ndarray((rows, cols), table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=table.ap([[stride, rows], [1, count]], 0))
    out = nl.ndarray((rows, cols), table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@pytest.mark.parametrize("stride", [16, 32, 5])
def test_a_dynamic_stride_and_count_are_read_at_run_time(stride):
    table = torch.randn(8, 16)
    out = strided_rows(table.to("neuron"), torch.tensor([[stride]], dtype=torch.int32).to("neuron"),
                       torch.tensor([[6]], dtype=torch.int32).to("neuron"), 4, 6)
    flat = table.reshape(-1)
    expected = torch.stack([flat[r * stride:r * stride + 6] for r in range(4)])
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("stride,count,match", [
    (41, 6, r"reaches elements 0\.\.128, outside the 128 elements"),
    (16, 0, r"count of dim 1 = 0.*counts must be at least 1"),
    (-16, 6, r"reaches elements -48\.\.5"),
])
def test_a_dynamic_pattern_outside_its_tensor_is_refused(stride, count, match):
    with pytest.raises(NkiValidationError, match=r"\[dynamic-pattern\] 'table' \(\w*hbm, shape "
                       r"\(8, 16\), float32\): the access pattern .*" + match):
        strided_rows(torch.zeros(8, 16), torch.tensor([[stride]], dtype=torch.int32),
                     torch.tensor([[count]], dtype=torch.int32), 4, 6)


def test_a_dynamic_pattern_keeps_the_partition_entry_static():
    @nki.jit
    def kernel(f):
        tile = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        tile.ap([[8, load(f)], [1, 8]], 0)
        return f

    with pytest.raises(NkiValidationError, match=r"\[dynamic-pattern\].*partition entry"):
        kernel(flag(4))


def test_a_dynamic_pattern_takes_signed_unbound_scalars():
    @nki.jit
    def kernel(table, f):
        table.ap([[16, 2], [1, load(f)]], 0)
        return table

    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*signed nl\.int32"):
        kernel(torch.zeros(8, 16), flag(4, np.uint32))


def test_a_dynamic_count_cannot_be_traced_for_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with pytest.raises(NkiUnsupportedError, match="count read at run time"), FakeTensorMode():
        strided_rows(torch.empty(8, 16, device="neuron"),
                     torch.empty(1, 1, dtype=torch.int32, device="neuron"),
                     torch.empty(1, 1, dtype=torch.int32, device="neuron"), 4, 6)
