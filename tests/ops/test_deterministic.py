"""torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (the default): new
memory on neuron holds NaN (floating, complex) or the integer maximum, as on the CPU."""

import pytest
import torch

MAKERS = {
    "empty": lambda dt, d: torch.empty(5, dtype=dt, device=d),
    "empty_like": lambda dt, d: torch.empty_like(torch.zeros(5, dtype=dt, device=d)),
    "empty_strided": lambda dt, d: torch.empty_strided((2, 3), (1, 2), dtype=dt, device=d),
    "new_empty": lambda dt, d: torch.zeros(1, dtype=dt, device=d).new_empty(5),
    "resize_": lambda dt, d: torch.zeros(2, dtype=dt, device=d).resize_(7),
}


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.complex64, torch.int64,
                                   torch.uint8, torch.bool])
@pytest.mark.parametrize("name", sorted(MAKERS))
def test_new_memory_is_filled_as_on_the_cpu(deterministic, name, dtype):
    cpu = MAKERS[name](dtype, "cpu")
    neuron = MAKERS[name](dtype, "neuron").cpu()
    torch.testing.assert_close(neuron, cpu, equal_nan=True)


def test_fill_can_be_turned_off(deterministic):
    torch.utils.deterministic.fill_uninitialized_memory = False
    try:
        torch.empty(3, device="neuron")  # runs; contents unspecified, as on the CPU
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True
