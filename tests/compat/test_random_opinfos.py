"""Random OpInfos are compared with the CPU in structure only: neuron's random stream is its own
(derived from Philox (seed, offset), like CUDA's), so seeded values differ from the CPU's."""

import torch
from torch.testing._internal.common_methods_invocations import op_db, python_ref_db

from torchneuron.compat.ops.cases import values_comparable


def _info(db, name, variant=""):
    return next(o for o in db if o.name == name and o.variant_test_name == variant)


def test_random_ops_are_compared_in_structure_only():
    for info in (_info(op_db, "randn"), _info(op_db, "randint"),
                 _info(op_db, "normal", "number_mean"), _info(op_db, "nn.functional.alpha_dropout"),
                 _info(python_ref_db, "_refs.nn.functional.alpha_dropout")):
        assert not values_comparable(info, torch.float32), info.name


def test_deterministic_ops_keep_their_values_compared():
    for info in (_info(op_db, "add"), _info(op_db, "matmul"), _info(python_ref_db, "_refs.add")):
        assert values_comparable(info, torch.float32), info.name
