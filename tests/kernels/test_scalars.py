"""NKI 0.8's device scalars: nisa.scalar_load/scalar_store, nisa.scalar_alu and the operators on
nisa.NkiScalar, against Python integer references (int32/uint32 wraparound, divide toward zero,
fmod with the dividend's sign), and each of their rules."""

import math

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiError, NkiUnsupportedError, NkiValidationError

I32 = (-2**31, 2**31 - 1)


def wrap(value, unsigned):
    value %= 2**32
    return value if unsigned or value < 2**31 else value - 2**32


def trunc_div(a, b):
    return int(math.copysign(abs(a) // abs(b), a * b)) if a * b else 0


REFERENCE = {
    "add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
    "divide": trunc_div, "fmod": lambda a, b: a - trunc_div(a, b) * b,
    "maximum": max, "minimum": min,
    "less": lambda a, b: int(a < b), "less_equal": lambda a, b: int(a <= b),
    "greater": lambda a, b: int(a > b), "greater_equal": lambda a, b: int(a >= b),
    "equal": lambda a, b: int(a == b), "not_equal": lambda a, b: int(a != b),
}
COMPARISONS = ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal")


def load(x, engine=None):
    """A scalar from a (1, 1) kernel argument (copied into an internal tile first)."""
    tile = nl.ndarray((1, 1), x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    return nisa.scalar_load(tile, engine=engine)


def out_of(value, dtype, engine=None):
    """A (1, 1) HBM result holding `value` (stored through an SBUF tile)."""
    tile = nl.ndarray((1, 1), dtype, buffer=nl.sbuf)
    nisa.scalar_store(tile, value, engine=engine)
    out = nl.ndarray((1, 1), dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def alu(op, a, b, numpy_dtype):
    """scalar_alu(a, b, op) on two device scalars of numpy_dtype; the result as a Python int."""
    @nki.jit
    def kernel(x, y):
        r = nisa.scalar_alu(load(x), load(y), op=op)
        return out_of(r, r.dtype)

    x, y = (np.array([[v]], dtype=numpy_dtype) for v in (a, b))
    return int(kernel(x, y)[0, 0])


PAIRS = [(-17, 4), (17, -4), (-17, -4), (100000, 100000), (I32[1], 1), (I32[0], -1), (5, 5),
         (0, 7)]


@pytest.mark.parametrize("name", list(REFERENCE))
@pytest.mark.parametrize("a,b", PAIRS)
def test_int32_operations_match_python(name, a, b):
    expected = REFERENCE[name](a, b)
    expected = expected if name in COMPARISONS else wrap(expected, unsigned=False)
    assert alu(getattr(nl, name), a, b, np.int32) == expected


@pytest.mark.parametrize("name", list(REFERENCE))
@pytest.mark.parametrize("a,b", [(0, 1), (2**32 - 1, 2), (3_000_000_000, 7), (65536, 65536),
                                 (17, 4)])
def test_uint32_operations_are_unsigned_and_wrap(name, a, b):
    expected = REFERENCE[name](a, b)
    expected = expected if name in COMPARISONS else wrap(expected, unsigned=True)
    assert alu(getattr(nl, name), a, b, np.uint32) == expected


def test_the_documented_examples():
    assert alu(nl.multiply, 100000, 100000, np.int32) == 1410065408  # wraps, never widens
    assert alu(nl.add, I32[1], 1, np.int32) == I32[0]
    assert alu(nl.divide, -17, 4, np.int32) == -4
    assert alu(nl.fmod, -17, 4, np.int32) == -1
    assert alu(nl.greater, 2**32 - 1, 1, np.uint32) == 1   # unsigned comparison
    assert alu(nl.greater, -1, 1, np.int32) == 0


def test_two_python_ints_fold_at_compile_time():
    assert nisa.scalar_alu(-17, 4, op=nl.divide) == -4
    assert nisa.scalar_alu(-17, 4, op=nl.fmod) == -1
    assert nisa.scalar_alu(2**40, 2, op=nl.multiply) == 2**41  # a Python int: no 32-bit wrap
    folded = nisa.scalar_alu(3, 4, op=nl.less)
    assert folded is True


def test_operators_equal_scalar_alu_and_comparisons_are_int32_scalars():
    @nki.jit
    def kernel(x, y):
        a, b = load(x), load(y)
        results = [a + b, a - b, a * b, -a, 3 - a, 2 * a, a + 5,
                   (a < b), (a <= b), (a > b), (a >= b), (a == b), (a != b)]
        same = [nisa.scalar_alu(a, b, op=nl.add), nisa.scalar_alu(a, b, op=nl.subtract),
                nisa.scalar_alu(a, b, op=nl.multiply), nisa.scalar_alu(0, a, op=nl.subtract),
                nisa.scalar_alu(3, a, op=nl.subtract), nisa.scalar_alu(2, a, op=nl.multiply),
                nisa.scalar_alu(a, 5, op=nl.add)] + [
                    nisa.scalar_alu(a, b, op=getattr(nl, c)) for c in COMPARISONS]
        tile = nl.ndarray((1, 2 * len(results)), nl.uint32, buffer=nl.sbuf)
        for i, r in enumerate(results + same):
            assert r.dtype == (nl.int32 if i % len(results) >= 7 else nl.uint32)
            cell = tile[0:1, i:i + 1]
            if r.dtype == nl.uint32:
                nisa.scalar_store(cell, r)
            else:  # comparisons are nl.int32: store them in an int32 view of the cell
                nisa.scalar_store(cell.view(nl.int32), r)
        out = nl.ndarray(tile.shape, nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out

    a, b = 7, 4_000_000_000
    out = kernel(np.array([[a]], np.uint32), np.array([[b]], np.uint32)).reshape(-1).tolist()
    n = len(out) // 2
    assert out[:n] == out[n:]
    assert out[:7] == [wrap(v, True) for v in (a + b, a - b, a * b, -a, 3 - a, 2 * a, a + 5)]
    assert out[7:n] == [int(f(a, b)) for f in (int.__lt__, int.__le__, int.__gt__, int.__ge__,
                                                int.__eq__, int.__ne__)]


def test_a_comparison_is_usable_in_arithmetic_and_stores():
    @nki.jit
    def kernel(x):
        s = load(x)
        return out_of((s > 10) * 100 + (s == 3) * 7 - 1, nl.int32)

    assert int(kernel(np.array([[3]], np.int32))[0, 0]) == 6
    assert int(kernel(np.array([[11]], np.int32))[0, 0]) == 99


@pytest.mark.parametrize("use", [lambda s: bool(s), lambda s: 1 if s else 0, lambda s: not s])
def test_a_scalar_is_not_a_python_condition(use):
    @nki.jit
    def kernel(x):
        use(load(x) > 0)
        return x

    with pytest.raises(NkiValidationError, match=r"\[scalar-condition\].*cannot be a Python "
                       r"if/while condition.*nl\.if_else"):
        kernel(np.array([[1]], np.int32))


@pytest.mark.parametrize("use", [int, lambda s: range(s), lambda s: [0, 1][s]])
def test_a_scalar_is_not_a_python_int(use):
    @nki.jit
    def kernel(x):
        use(load(x))
        return x

    with pytest.raises(NkiValidationError, match=r"\[scalar-condition\].*not a Python int"):
        kernel(np.array([[1]], np.int32))


@pytest.mark.parametrize("use", [lambda s: s / 2, lambda s: s // 2, lambda s: s % 2,
                                 lambda s: 7 // s])
def test_division_operators_are_refused_for_scalar_alu(use):
    @nki.jit
    def kernel(x):
        use(load(x))
        return x

    with pytest.raises(NkiUnsupportedError, match=r"op=nl\.divide.*op=nl\.fmod"):
        kernel(np.array([[1]], np.int32))


def test_signedness_mismatch_is_refused():
    @nki.jit
    def kernel(x, y):
        load(x) + load(y)
        return x

    with pytest.raises(NkiValidationError, match=r"\[scalar-dtype\].*same width and signedness"):
        kernel(np.array([[1]], np.int32), np.array([[1]], np.uint32))


@pytest.mark.parametrize("dtype,value", [(np.uint32, -1), (np.int32, 2**31), (np.uint32, 2**32)])
def test_a_python_int_must_fit_the_scalars_dtype(dtype, value):
    @nki.jit
    def kernel(x):
        load(x) + value
        return x

    with pytest.raises(NkiValidationError, match=rf"\[scalar-dtype\].*data2={value} does not fit"):
        kernel(np.array([[1]], dtype))


@pytest.mark.parametrize("op", [nl.power, nl.bitwise_and, nl.exp, "add"])
def test_only_the_documented_operations(op):
    with pytest.raises(NkiValidationError, match=r"\[scalar-op\].*not a scalar operation"):
        nisa.scalar_alu(1, 2, op=op)


@pytest.mark.parametrize("a,b", [(1.5, 2), (True, 1), (1, None)])
def test_operands_are_scalars_or_python_ints(a, b):
    with pytest.raises(NkiValidationError, match=r"\[scalar-dtype\].*must be an NkiScalar or a "
                       "Python int"):
        nisa.scalar_alu(a, b, op=nl.add)


def test_division_by_zero_is_refused():
    with pytest.raises(NkiValidationError, match=r"\[scalar-op\].*nl\.divide of 1 by zero"):
        nisa.scalar_alu(1, 0, op=nl.divide)

    @nki.jit
    def kernel(x, y):
        nisa.scalar_alu(load(x), load(y), op=nl.fmod)
        return x

    with pytest.raises(NkiValidationError, match=r"\[scalar-op\].*nl\.fmod of .* by zero"):
        kernel(np.array([[5]], np.int32), np.array([[0]], np.int32))


def test_int64_scalars_are_refused():
    with pytest.raises(NkiError, match="int64"):
        nisa.NkiScalar(1, dtype="int64")


def test_scalar_load_rules():
    def run(make, match):
        @nki.jit
        def kernel(x):
            nisa.scalar_load(make(x))
            return x

        with pytest.raises(NkiValidationError, match=match):
            kernel(np.zeros((1, 1), np.int32))

    run(lambda x: nl.ndarray((1, 2), nl.int32, buffer=nl.sbuf),
        r"\[scalar-operand\].*must name exactly one element")
    run(lambda x: nl.ndarray((1, 1), nl.int32, buffer=nl.psum), r"\[scalar-operand\].*PSUM")
    run(lambda x: x, r"\[scalar-operand\].*kernel argument")
    run(lambda x: x[0:1, 0:1], r"\[scalar-operand\].*kernel argument")
    run(lambda x: nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf),
        r"\[scalar-operand\].*must be nl\.int32 or nl\.uint32")
    run(lambda x: nl.ndarray((1, 1), nl.int16, buffer=nl.sbuf),
        r"\[scalar-operand\].*must be nl\.int32 or nl\.uint32")
    run(lambda x: 3, r"\[scalar-operand\].*must be an NKI tensor")

    @nki.jit
    def bad_engine(x):
        load(x, engine="vector")
        return x

    with pytest.raises(NkiValidationError, match=r"\[scalar-engine\].*is not a nisa\.engine"):
        bad_engine(np.zeros((1, 1), np.int32))


def test_scalar_load_reads_a_one_element_slice_of_hbm():
    @nki.jit
    def kernel(x):
        table = nl.ndarray((2, 3), nl.int32, buffer=nl.hbm)
        nisa.dma_copy(dst=table, src=x)
        return out_of(nisa.scalar_load(table[1:2, 2:3]) + 1, nl.int32)

    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert int(kernel(x)[0, 0]) == 6


def test_scalar_store_rules():
    def run(store, match):
        @nki.jit
        def kernel(x):
            store(x, load(x))
            return x

        with pytest.raises(NkiValidationError, match=match):
            kernel(np.zeros((1, 1), np.int32))

    run(lambda x, s: nisa.scalar_store(nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf), 5),
        r"\[scalar-operand\].*value=5 must be an NkiScalar")
    run(lambda x, s: nisa.scalar_store(nl.ndarray((1, 1), nl.uint32, buffer=nl.sbuf), s),
        r"\[scalar-dtype\].*must have the scalar's dtype int32")
    run(lambda x, s: nisa.scalar_store(nl.ndarray((2, 1), nl.int32, buffer=nl.sbuf), s),
        r"\[scalar-operand\].*exactly one element")
    run(lambda x, s: nisa.scalar_store(x, s), r"\[scalar-operand\].*kernel argument")
    run(lambda x, s: nisa.scalar_store(nl.ndarray((1, 1), nl.int32, buffer=nl.psum), s),
        r"\[scalar-operand\].*PSUM")


def test_engine_binding():
    @nki.jit
    def stores_with_its_engine(x):
        return out_of(load(x, engine=nisa.engine.vector) + 1, nl.int32,
                      engine=nisa.engine.vector)

    assert int(stores_with_its_engine(np.array([[4]], np.int32))[0, 0]) == 5

    def run(body, match):
        @nki.jit
        def kernel(x):
            body(x)
            return x

        with pytest.raises(NkiValidationError, match=match):
            kernel(np.zeros((1, 1), np.int32))

    run(lambda x: out_of(load(x, engine=nisa.engine.vector), nl.int32),
        r"\[scalar-engine\].*bound to one sequencer.*engine=nisa\.engine\.vector")
    run(lambda x: out_of(load(x, engine=nisa.engine.vector), nl.int32,
                         engine=nisa.engine.scalar),
        r"\[scalar-engine\].*not available on engine scalar")
    run(lambda x: load(x, engine=nisa.engine.vector) + load(x, engine=nisa.engine.gpsimd),
        r"\[scalar-engine\].*different engines")
    # an unbound operand is available on every engine: the result stays bound
    run(lambda x: out_of(load(x, engine=nisa.engine.vector) + load(x), nl.int32),
        r"\[scalar-engine\].*bound to one sequencer")


def test_a_scalar_offset_selects_a_row_at_run_time():
    @nki.jit
    def kernel(table, index):
        n, d = table.shape
        row = nl.ndarray((1, d), table.dtype, buffer=nl.sbuf)
        s = load(index)
        nisa.dma_copy(dst=row, src=table.ap([[d, 1], [1, d]], 0,
                                            scalar_offset=(s > 2) * 2 + s, indirect_dim=0))
        out = nl.ndarray((1, d), table.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=row)
        return out

    table = torch.randn(10, 8)
    for i in (1, 3):
        out = kernel(table, np.array([[i]], np.int32))
        torch.testing.assert_close(out, table[i + 2 * (i > 2):][:1])
    with pytest.raises(NkiValidationError, match=r"\[indirect-offset\].*index 16.*size is 10"):
        kernel(table, np.array([[14]], np.int32))


@pytest.mark.parametrize("engine,dtype,match", [
    (None, np.uint32, r"\[indirect-offset\].*signed nl\.int32 scalar"),
    ("vector", np.int32, r"\[indirect-offset\].*bound to one sequencer")])
def test_scalar_offset_rules(engine, dtype, match):
    @nki.jit
    def kernel(table, index):
        row = nl.ndarray((1, 8), table.dtype, buffer=nl.sbuf)
        s = load(index, engine=getattr(nisa.engine, engine) if engine else None)
        nisa.dma_copy(dst=row, src=table.ap([[8, 1], [1, 8]], 0, scalar_offset=s,
                                            indirect_dim=0))
        return table

    with pytest.raises(NkiValidationError, match=match):
        kernel(torch.zeros(4, 8), np.array([[1]], dtype))
