"""nki.CompileConfig / nki.Allocation (NKI 0.8): @nki.jit(compile_config=...) checks and records
the configuration; the software NeuronCore's results do not depend on it."""

import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl
from nki import Allocation, CompileConfig
from torchneuron.kernels.nki import NkiUnsupportedError, NkiValidationError
from torchneuron.kernels.nki.errors import NkiTypeError


def scale(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_the_names_and_their_defaults():
    assert nki.compiler.CompileConfig is CompileConfig
    assert nki.compiler.Allocation is Allocation
    assert {a.name for a in Allocation} == {"COLORING", "LINEAR"}
    config = CompileConfig()
    assert (config.allocation, config.scheduling, config.prefetch_auto) == \
        (Allocation.COLORING, False, None)
    assert nki.jit(scale).compile_config == CompileConfig()


def test_jit_records_the_config_and_results_do_not_depend_on_it():
    linear = CompileConfig(allocation=Allocation.LINEAR, scheduling=True, prefetch_auto=True)
    kernel = nki.jit(compile_config=linear)(scale)
    assert kernel.compile_config is linear and kernel[2].compile_config is linear
    assert kernel.compile_config.prefetch_auto is True
    x = torch.randn(16, 32)
    torch.testing.assert_close(kernel(x), nki.jit(scale)(x))
    torch.testing.assert_close(kernel(x), x * 3.0)
    np.testing.assert_array_equal(nki.execute(kernel, x.numpy()), (x * 3.0).numpy())


def test_scheduling_needs_linear_allocation():
    with pytest.raises(NkiValidationError, match=r"\[compile-config\] CompileConfig: "
                       r"scheduling=True needs allocation=Allocation.LINEAR"):
        CompileConfig(scheduling=True)


def test_bad_values_are_refused():
    with pytest.raises(NkiTypeError, match=r"allocation='linear' must be an "
                       r"nki.compiler.Allocation"):
        CompileConfig(allocation="linear")
    with pytest.raises(NkiTypeError, match=r"scheduling=1 must be True or False"):
        CompileConfig(allocation=Allocation.LINEAR, scheduling=1)
    with pytest.raises(NkiTypeError, match=r"dead_code_elim='yes' must be True or False"):
        CompileConfig(dead_code_elim="yes")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'allocator'"):
        CompileConfig(allocator=Allocation.LINEAR)
    with pytest.raises(TypeError, match=r"positional"):
        CompileConfig(Allocation.LINEAR)
    with pytest.raises(NkiTypeError, match=r"compile_config=\{'allocation': 'LINEAR'\} must be "
                       r"an nki.compiler.CompileConfig"):
        nki.jit(compile_config={"allocation": "LINEAR"})(scale)


def test_options_typed_by_unmodelled_enums_are_refused():
    with pytest.raises(NkiUnsupportedError, match=r"opt_level= takes an nki.compiler.OptLevel"):
        CompileConfig(allocation=Allocation.LINEAR, opt_level=2)
    with pytest.raises(NkiUnsupportedError, match=r"address_rotation= takes an "
                       r"nki.compiler.AddressRotation"):
        CompileConfig(address_rotation=None)


def test_nki_compiler_is_an_importable_module():
    # NKI 0.8 documents the names as nki.compiler.CompileConfig / nki.compiler.Allocation.
    import nki.compiler
    from nki.compiler import Allocation as imported_allocation

    assert nki.compiler.CompileConfig is nki.CompileConfig
    assert imported_allocation is nki.Allocation
