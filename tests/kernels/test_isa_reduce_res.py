"""The reduction result operand of the instructions that reduce each partition (nisa.activation,
nisa.activate2, nisa.range_select; one check in isa_common.check_reduce_res): an on-chip tile of
one value per partition of the data, else an error naming the operand and the shape it needs
(the accepted column is checked against torch in test_isa_activate2.py and test_isa_select.py)."""

import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiValidationError


def reduce_into(instr: str, shape: tuple[int, int], buffer):
    def kernel(x):
        t = nl.ndarray((4, 8), nl.float32, buffer=nl.sbuf)
        res = nl.ndarray(shape, nl.float32, buffer=buffer, name="res")
        if instr == "activation":
            nisa.activation(dst=t, op=nl.exp, data=t, reduce_op=nl.add, reduce_res=res)
        elif instr == "activate2":
            nisa.activate2(dst=t, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply,
                           op1=nl.bypass, reduce_op=nl.add, reduce_res=res)
        else:
            nisa.range_select(dst=t, on_true_tile=t, comp_op0=nl.greater_equal,
                              comp_op1=nl.less, bound0=0.0, bound1=8.0, reduce_res=res)
    return nki.jit(kernel, platform_target="trn3")


INSTRUCTIONS = ("activation", "activate2", "range_select")


@pytest.mark.parametrize("instr", INSTRUCTIONS)
def test_reduce_res_needs_one_value_per_partition(instr):
    with pytest.raises(NkiValidationError, match=rf"\[operand-shape\] nisa.{instr}: reduce_res "
                       r"'res' \(sbuf, shape \(4, 2\), float32\) must be \(4, 1\)"):
        reduce_into(instr, (4, 2), nl.sbuf)(torch.zeros(1))


@pytest.mark.parametrize("instr", INSTRUCTIONS)
def test_reduce_res_must_be_on_chip(instr):
    with pytest.raises(NkiValidationError, match=rf"\[memory-access\] nisa.{instr}: reduce_res "
                       r"'res' .* is in HBM"):
        reduce_into(instr, (4, 1), nl.hbm)(torch.zeros(1))

