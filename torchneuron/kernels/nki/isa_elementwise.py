"""Element-wise instructions of the Vector, Scalar and GpSimd Engines: tensor_tensor,
tensor_scalar, scalar_tensor_tensor, tensor_tensor_scan, activation, reciprocal, affine_select,
iota, tensor_copy_predicated, dropout, exponential.

Arithmetic reads every operand as float32, computes in float32 and casts to dst.dtype (the
documented rule); bitvec operators work on integer bit patterns; tensor_tensor on int32/uint32
operands computes exact integers, as the GpSimd Engine does.
"""

from __future__ import annotations

import torch

from . import dtypes as dt
from .context import current
from .errors import describe
from .isa_common import (as_engine, check_reduce_res, int_matrix, matrix, require_arch,
                         require_engine_reach, require_integer, scalar_or_vector, store)
from .isa_enums import engine as Engine
from .isa_enums import reduce_cmd as ReduceCmd
from .ops import as_op, equal, power
from .rules import (elements_per_partition, fail, not_both_psum, on_chip_operand,
                    require_same_free_size, require_same_partitions)
from .tensor import NkiTensor


def _checked(instr: str, run, operands: dict, allowed=("sbuf", "psum")) -> None:
    for role, t in operands.items():
        on_chip_operand(instr, role, t, run.limits, allowed)
    require_same_partitions(instr, operands)
    require_same_free_size(instr, operands)


def _apply(op, x, operand, reverse: bool):
    if op.unary is not None:
        return op.unary(x)
    return op.binary(operand, x) if reverse else op.binary(x, operand)


def tensor_tensor(dst, data1, data2, op, engine=Engine.unknown, name=None):
    I = "nisa.tensor_tensor"
    run = current()
    op = as_op(op, I)
    eng = as_engine(I, engine)
    if op.binary is None:
        fail("operator", f"{I}: op={op!r} is not a binary operator")
    operands = {"dst": dst, "data1": data1, "data2": data2}
    _checked(I, run, operands)
    not_both_psum(I, "data1", data1, "data2", data2)
    if op is power:
        eng = Engine.gpsimd  # power runs on GpSimd (documented)
    require_engine_reach(I, eng, operands)
    if op.kind == "bitvec":
        require_integer(I, operands, f"{op!r} is a bitvec operator")
    if not run.computes:
        return
    ints = {dt.int32, dt.uint32}
    exact = (op.kind == "bitvec" or all(t.dtype in ints for t in operands.values())
             and eng is not Engine.vector
             and not any(t.buffer.kind == "psum" for t in operands.values()))
    if exact:
        result = op.binary(int_matrix(data1), int_matrix(data2))
        if op.kind == "bitvec":
            dst.write_raw(result.to(dst.dtype.storage).reshape(dst.shape), run)
            return
    else:
        result = op.binary(matrix(data1), matrix(data2))
    store(dst, result, run)


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=Engine.unknown, name=None):
    I = "nisa.tensor_scalar"
    run = current()
    op0 = as_op(op0, I, "op0")
    op1 = as_op(op1, I, "op1") if op1 is not None else None
    eng = as_engine(I, engine)
    operands = {"dst": dst, "data": data}
    _checked(I, run, operands)
    require_engine_reach(I, eng, {**operands, "operand0": operand0, "operand1": operand1})
    if op0.binary is None and operand0 not in (None, 0, 0.0):
        fail("operand-shape", f"{I}: op0={op0!r} is unary; operand0 must be None or 0")
    if op1 is None and operand1 is not None:
        fail("operand-shape", f"{I}: operand1 is given but op1 is None")
    if op1 is not None and op1.kind != op0.kind:
        fail("operator", f"{I}: op0={op0!r} and op1={op1!r} mix a bitvec and an arithmetic "
             "operator; both must be of one kind")
    bitvec = op0.kind == "bitvec"
    if bitvec:
        require_integer(I, operands, "bitvec operators treat elements as bit patterns")
    if eng is Engine.scalar:
        allowed = {("multiply", "add"), ("multiply", None), ("add", None)}
        if (op0.name, op1.name if op1 else None) not in allowed:
            fail("engine-operator", f"{I}: the Scalar Engine supports op0/op1 = multiply/add, "
                 f"multiply/None or add/None; got {op0!r}/{op1!r}")
    P = data.shape[0]
    v0 = scalar_or_vector(I, "operand0", operand0, P, run, require_f32=not bitvec)
    v1 = scalar_or_vector(I, "operand1", operand1, P, run, require_f32=not bitvec)
    if not run.computes:
        return
    if bitvec:
        x = int_matrix(data)
        x = _apply(op0, x, int(operand0 or 0) if not torch.is_tensor(v0) else v0.long(),
                   reverse0)
        if op1 is not None:
            x = _apply(op1, x, int(operand1) if not torch.is_tensor(v1) else v1.long(), reverse1)
        dst.write_raw(x.to(dst.dtype.storage).reshape(dst.shape), run)
        return
    x = _apply(op0, matrix(data), v0, reverse0)
    if op1 is not None:
        x = _apply(op1, x, v1, reverse1)
    store(dst, x, run)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                         name=None):
    I = "nisa.scalar_tensor_tensor"
    run = current()
    op0, op1 = as_op(op0, I, "op0"), as_op(op1, I, "op1")
    for role, op in (("op0", op0), ("op1", op1)):
        if op.kind != "arith":
            fail("operator", f"{I}: {role}={op!r} must be an arithmetic operator")
    operands = {"dst": dst, "data": data, "operand1": operand1}
    _checked(I, run, operands)
    not_both_psum(I, "data", data, "operand1", operand1)
    v0 = scalar_or_vector(I, "operand0", operand0, data.shape[0], run)
    if not run.computes:
        return
    x = _apply(op0, matrix(data), v0, reverse0)
    x = _apply(op1, x, matrix(operand1), reverse1)
    store(dst, x, run)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None):
    I = "nisa.tensor_tensor_scan"
    run = current()
    op0, op1 = as_op(op0, I, "op0"), as_op(op1, I, "op1")
    operands = {"dst": dst, "data0": data0, "data1": data1}
    _checked(I, run, operands)
    not_both_psum(I, "data0", data0, "data1", data1)
    init = scalar_or_vector(I, "initial", initial, data0.shape[0], run)
    if not run.computes:
        return
    a, b = matrix(data0), matrix(data1)
    out = torch.empty_like(a)
    prev = init if torch.is_tensor(init) else torch.full((a.shape[0], 1), float(init))
    for i in range(a.shape[1]):
        ai, bi = a[:, i:i + 1], b[:, i:i + 1]
        t = op0.binary(prev, ai) if reverse0 else op0.binary(ai, prev)
        prev = op1.binary(bi, t) if reverse1 else op1.binary(t, bi)
        out[:, i:i + 1] = prev
    store(dst, out, run)


def _reduce_registers(instr, run, regs, result_sum, P, reduce_cmd_, reduce_res, init=None):
    if reduce_cmd_ in (ReduceCmd.reset, ReduceCmd.reset_reduce):
        regs[:P] = 0.0
    if reduce_cmd_ is ReduceCmd.load_reduce:
        regs[:P] = init.reshape(-1) if torch.is_tensor(init) else float(init)
    if reduce_cmd_ in (ReduceCmd.reduce, ReduceCmd.reset_reduce, ReduceCmd.load_reduce):
        regs[:P] += result_sum
    if reduce_res is not None:
        store(reduce_res, regs[:P].reshape(P, 1), run)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=ReduceCmd.idle, name=None):
    I = "nisa.activation"
    run = current()
    op = as_op(op, I)
    if not op.activation:
        fail("operator", f"{I}: op={op!r} is not an activation function of the Scalar Engine "
             "(see the activation function table in docs/nki.md)")
    if op.unary is None:
        fail("operator", f"{I}: op={op!r} takes its slope from nisa.activate2's relu_param; "
             "nisa.activation has no slope operand")
    _checked(I, run, {"dst": dst, "data": data})
    P = data.shape[0]
    if bias is not None and not isinstance(bias, NkiTensor) and run.limits.nc_version == "gen2":
        fail("operand-shape", f"{I}: a scalar bias needs NeuronCore-v3 or newer")
    if isinstance(bias, NkiTensor) and bias.dtype is dt.tfloat32:
        fail("operand-dtype", f"{I}: bias {describe(bias)} cannot be tfloat32")
    b = scalar_or_vector(I, "bias", bias, P, run)
    s = scalar_or_vector(I, "scale", scale, P, run, require_f32=True)
    if reduce_op is not None:
        reduce_op = as_op(reduce_op, I, "reduce_op")
        if reduce_op.name != "add":
            fail("operator", f"{I}: reduce_op must be nl.add, got {reduce_op!r}")
    check_reduce_res(I, reduce_res, P, run)
    if not run.computes:
        return
    source = matrix(data)  # float32 data: the memory itself
    x = source
    if not (isinstance(s, float) and s == 1.0):  # the common scale of 1 costs no pass
        x = x * s
    if b is not None:
        x = x + b
    y = op.unary(x)
    if y is source:  # nl.copy of unscaled data: never write dst from memory it may overlap
        y = y.clone()
    store(dst, y, run)
    if reduce_op is not None or reduce_res is not None or reduce_cmd is not ReduceCmd.idle:
        _reduce_registers(I, run, run.scalar_regs(), y.sum(dim=1), P, reduce_cmd, reduce_res)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    if reduce_res is None:
        fail("operand-shape", "nisa.activation_reduce: reduce_res is required")
    activation(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op,
               reduce_res=reduce_res, reduce_cmd=ReduceCmd.reset_reduce)


def reciprocal(dst, data, name=None):
    I = "nisa.reciprocal"
    run = current()
    _checked(I, run, {"dst": dst, "data": data})
    if run.computes:
        store(dst, torch.reciprocal(matrix(data)), run)


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=ReduceCmd.idle,
                reduce_init=0.0, name=None):
    I = "nisa.exponential"
    run = current()
    require_arch(I, "gen4")
    _checked(I, run, {"dst": dst, "src": src})
    P = src.shape[0]
    m = scalar_or_vector(I, "max_value", max_value, P, run, require_f32=True)
    if not run.computes:
        return
    y = torch.exp(matrix(src) - m)
    store(dst, y, run)
    if reduce_res is not None or reduce_cmd is not ReduceCmd.idle:
        _reduce_registers(I, run, run.vector_regs(), y.sum(dim=1), P, reduce_cmd, reduce_res,
                          init=float(reduce_init))


def _pattern_values(instr: str, dst, pattern, offset, channel_multiplier) -> torch.Tensor:
    pattern = [list(p) for p in pattern]
    if not 1 <= len(pattern) <= 4 or any(len(p) != 2 for p in pattern):
        fail("pattern", f"{instr}: pattern {pattern} must be 1 to 4 [step, num] pairs")
    count = 1
    for _, num in pattern:
        count *= int(num)
    if count != elements_per_partition(dst):
        fail("pattern", f"{instr}: pattern {pattern} describes {count} elements per partition "
             f"but dst {describe(dst)} has {elements_per_partition(dst)}")
    value = torch.full((dst.shape[0], 1), int(offset), dtype=torch.int64)
    value = value + torch.arange(dst.shape[0]).reshape(-1, 1) * int(channel_multiplier)
    grid = torch.zeros(1, dtype=torch.int64)
    for step, num in pattern:
        grid = (grid.reshape(-1, 1) + torch.arange(int(num)).reshape(1, -1) * int(step)).reshape(-1)
    return value + grid.reshape(1, -1)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    I = "nisa.iota"
    run = current()
    on_chip_operand(I, "dst", dst, run.limits, ("sbuf",))
    values = _pattern_values(I, dst, pattern, offset, channel_multiplier)
    if run.computes:
        store(dst, values, run)


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=equal,
                  offset=0, name=None):
    I = "nisa.affine_select"
    run = current()
    _checked(I, run, {"dst": dst, "on_true_tile": on_true_tile}, ("sbuf",))
    cmp_op = as_op(cmp_op, I, "cmp_op")
    if not cmp_op.compare:
        fail("operator", f"{I}: cmp_op={cmp_op!r} must be a comparison (nl.equal, nl.greater, ...)")
    values = _pattern_values(I, dst, pattern, offset, channel_multiplier)
    if not run.computes:
        return
    keep = cmp_op.binary(values.to(torch.float32), torch.zeros(1)) != 0
    fill = torch.tensor(dt.float32_constant(on_false_value))  # FP32_MIN etc. round, not fail
    store(dst, torch.where(keep, matrix(on_true_tile), fill), run)


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    I = "nisa.tensor_copy_predicated"
    run = current()
    operands = {"dst": dst, "predicate": predicate}
    if isinstance(src, NkiTensor):
        operands["src"] = src
        if src.dtype is not dst.dtype:
            fail("operand-dtype", f"{I}: src {describe(src)} and dst {describe(dst)} must share "
                 "a dtype")
        not_both_psum(I, "src", src, "predicate", predicate)
    _checked(I, run, operands)
    if predicate.dtype not in (dt.uint8, dt.uint16, dt.uint32):
        fail("operand-dtype", f"{I}: predicate {describe(predicate)} must be uint8, uint16 or "
             "uint32")
    if not run.computes:
        return
    mask = int_matrix(predicate) != 0
    if reverse_pred:
        mask = ~mask
    new = matrix(src) if isinstance(src, NkiTensor) else torch.full(mask.shape, float(src))
    store(dst, torch.where(mask, new, matrix(dst)), run)


def dropout(dst, data, prob, name=None):
    I = "nisa.dropout"
    run = current()
    _checked(I, run, {"dst": dst, "data": data})
    if dst.dtype is not data.dtype:
        fail("operand-dtype", f"{I}: dst {describe(dst)} must have data's dtype {data.dtype}")
    p = scalar_or_vector(I, "prob", prob, data.shape[0], run)
    if not run.computes:
        return
    x = matrix(data)
    keep = torch.rand(x.shape, generator=run.generator) >= p
    store(dst, torch.where(keep, x, 0.0), run)
