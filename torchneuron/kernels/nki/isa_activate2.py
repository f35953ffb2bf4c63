"""nisa.activate2 (NeuronCore-v4): the Scalar Engine's three-stage pipeline per partition, as
nki.isa documents it: (data op0 imm0) op1 imm1, then the activation `op`, then an optional
reduction into the engine's accumulation registers (shared with nisa.activation)."""

from __future__ import annotations

import torch

from .context import current
from .isa_common import check_reduce_res, matrix, require_arch, scalar_or_vector, store
from .isa_enums import reduce_cmd as ReduceCmd
from .ops import add, as_op
from .rules import fail, on_chip_operand, require_same_free_size, require_same_partitions

# The six documented (op0, op1) pairs of the tensor-scalar stage.
PAIRS = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"),
         ("add", "bypass"), ("subtract", "bypass"), ("bypass", "bypass")}
_REDUCERS = ("add", "maximum", "minimum")
_COMMANDS = (ReduceCmd.idle, ReduceCmd.reset_reduce, ReduceCmd.reduce)


def _stage(op, x, imm, reverse: bool):
    if op.name == "bypass":
        return x
    return op.binary(imm, x) if reverse else op.binary(x, imm)


def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False,
              reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=ReduceCmd.idle,
              name=None):
    I = "nisa.activate2"
    run = current()
    require_arch(I, "gen4")
    op = as_op(op, I)
    if not op.activation:
        fail("operator", f"{I}: op={op!r} is not an activation function of the Scalar Engine")
    op0, op1 = as_op(op0, I, "op0"), as_op(op1, I, "op1")
    if (op0.name, op1.name) not in PAIRS:
        fail("operator", f"{I}: (op0, op1) = ({op0!r}, {op1!r}) is not one of the documented "
             "pairs: (multiply, add), (multiply, subtract), (multiply, bypass), (add, bypass), "
             "(subtract, bypass), (bypass, bypass)")
    reduce = as_op(reduce_op, I, "reduce_op") if reduce_op is not None else None
    if reduce is not None and reduce.name not in _REDUCERS:
        fail("operator", f"{I}: reduce_op={reduce!r} must be nl.add, nl.maximum or nl.minimum")
    if reduce_cmd not in _COMMANDS:
        fail("operator", f"{I}: reduce_cmd={reduce_cmd!r} must be reduce_cmd.idle, "
             "reset_reduce or reduce")
    if isinstance(relu_param, bool) or not isinstance(relu_param, (int, float)):
        fail("operand-type", f"{I}: relu_param={relu_param!r} must be a compile-time number")
    operands = {"dst": dst, "data": data}
    for role, t in operands.items():
        on_chip_operand(I, role, t, run.limits)
    require_same_partitions(I, operands)
    require_same_free_size(I, operands)
    P = data.shape[0]
    v0 = scalar_or_vector(I, "imm0", imm0, P, run, require_f32=True)
    v1 = scalar_or_vector(I, "imm1", imm1, P, run, require_f32=True)
    check_reduce_res(I, reduce_res, P, run)
    if not run.computes:
        return
    x = _stage(op1, _stage(op0, matrix(data), v0, reverse0), v1, reverse1)
    if op.name == "prelu":
        y = torch.where(x >= 0, x, x * float(relu_param))
    else:
        y = op.unary(x)
        if op.name in ("bypass", "copy"):
            y = y.clone()  # never write dst from the memory it may overlap
    store(dst, y, run)
    if reduce is None and reduce_res is None and reduce_cmd is ReduceCmd.idle:
        return
    reduce = reduce or add  # the documented default reduction
    row = reduce.reduce(y, (1,))
    regs = run.scalar_regs()
    if reduce_cmd is ReduceCmd.reset_reduce:
        regs[:P] = row
    elif reduce_cmd is ReduceCmd.reduce:
        regs[:P] = reduce.binary(regs[:P], row)
    if reduce_res is not None:
        store(reduce_res, (row if reduce_cmd is ReduceCmd.idle else regs[:P]).reshape(P, 1), run)
