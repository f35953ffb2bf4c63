"""The C++ core is picked by torch version (torchneuron/runtime/extension.py): the loaded
torchneuron._C is the build of the running torch, reachable under its usual name, and a torch
without a build gets an error naming the version and how to build it."""

from pathlib import Path

import pytest
import torch

import torchneuron
from torchneuron.runtime import extension


def test_the_loaded_core_is_this_torch_versions_build():
    import torchneuron._C as by_import

    from torchneuron import _C

    assert by_import is _C is torchneuron._C
    path = Path(_C.__file__).resolve()
    assert path.parent == extension.build_dir(torch.__version__)
    assert path == extension.find(torch.__version__)
    # The core works: a neuron tensor made through it equals the CPU's.
    x = torch.arange(6.0).reshape(2, 3)
    torch.testing.assert_close((x.to("neuron") * 2).cpu(), x * 2)


def test_a_torch_version_without_a_build_is_named_with_the_command_to_build():
    with pytest.raises(FileNotFoundError, match=r"not built for torch 0\.0\.1\+none .*"
                                                r"setup\.py build_ext --inplace"):
        extension.find("0.0.1+none")


def test_the_error_lists_the_versions_that_are_built():
    with pytest.raises(FileNotFoundError) as info:
        extension.find("0.0.1+none")
    assert "built for: " in str(info.value)
    assert torch.__version__ in str(info.value)


def test_inductors_generated_imports_reach_the_core(python):
    done = python("from torchneuron._C import compile as neuron_compile_c\n"
                  "neuron_compile_c.empty_strided, neuron_compile_c.launch_kernel\n"
                  "neuron_compile_c.as_one_item\n"
                  "print('ok')")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
