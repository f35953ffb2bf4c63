"""NEURON_KERNEL_MODE: read by the configuration module, `fast` by default, `simulate` runs the
library's NKI kernels (checked end to end in a fresh process), anything else a ConfigError."""

import textwrap

import pytest

from tests.conftest import run_python
from torchneuron.runtime import config


def test_fast_is_the_default_and_values_are_case_insensitive():
    assert config.load({}).kernel_mode == "fast"
    assert config.load({"NEURON_KERNEL_MODE": " Simulate "}).kernel_mode == "simulate"


def test_a_bad_value_names_the_variable_and_the_accepted_values():
    with pytest.raises(config.ConfigError,
                       match=r"NEURON_KERNEL_MODE='turbo' is not valid; accepted values: fast, "
                             "simulate"):
        config.load({"NEURON_KERNEL_MODE": "turbo"})


SCRIPT = """
import importlib
import torch
from torchneuron.kernels import library as kl
module = importlib.import_module("torchneuron.kernels.library.rms_norm")
calls = []
kernel = module.rms_norm_kernel
module.rms_norm_kernel = lambda *a: calls.append(1) or kernel(*a)
x, w = torch.randn(3, 8), torch.randn(8)
out = kl.rms_norm(x.to("neuron"), w.to("neuron"))
torch.testing.assert_close(out.cpu(), kl.rms_norm_reference(x, w))
print("kernel calls", len(calls))
"""


@pytest.mark.parametrize("value, calls", [("simulate", 1), ("fast", 0)])
def test_the_environment_variable_chooses_the_kernels(value, calls):
    done = run_python(textwrap.dedent(SCRIPT), env={"NEURON_KERNEL_MODE": value})
    assert done.returncode == 0, done.stderr
    assert f"kernel calls {calls}" in done.stdout


def test_a_bad_value_fails_at_the_first_device_use():
    done = run_python("import torch\nfrom torchneuron.kernels import library as kl\n"
                      "kl.rms_norm(torch.ones(2, 2, device='neuron'), torch.ones(2, "
                      "device='neuron'))", env={"NEURON_KERNEL_MODE": "turbo"})
    assert done.returncode != 0
    assert "ConfigError: NEURON_KERNEL_MODE='turbo' is not valid" in done.stderr
