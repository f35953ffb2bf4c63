"""Configuration from the environment: profiles, visible cores, HBM capacity, policies."""

import pytest

from torchneuron.runtime import config
from torchneuron.runtime.profiles import GiB, PROFILES


def test_defaults_come_from_the_trn2_profile():
    cfg = config.load({})
    assert cfg.profile is PROFILES["trn2"]
    assert cfg.logical_nc_config == 2
    assert cfg.device_count == 4  # 8 physical cores fused in pairs
    assert cfg.hbm_bytes_per_device == 24 * GiB
    assert cfg.float64_policy == "warn"
    assert cfg.compile_gemm == "onednn"
    assert config.load({"NEURON_COMPILE_GEMM": "ATen"}).compile_gemm == "aten"


def test_trn3_and_lnc1():
    cfg = config.load({"NEURON_PROFILE": "trn3", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert cfg.device_count == 8
    assert cfg.hbm_bytes_per_device == 18 * GiB


def test_visible_cores_and_hbm_override():
    cfg = config.load({"NEURON_RT_VISIBLE_CORES": "0-2,5", "NEURON_HBM_BYTES": "512MiB"})
    assert cfg.visible_cores == (0, 1, 2, 5)
    assert cfg.hbm_bytes_per_device == 512 << 20
    assert config.parse_bytes("X", "1.5GiB") == 3 << 29


@pytest.mark.parametrize("env, var", [
    ({"NEURON_PROFILE": "trn9"}, "NEURON_PROFILE"),
    ({"NEURON_LOGICAL_NC_CONFIG": "3"}, "NEURON_LOGICAL_NC_CONFIG"),
    ({"NEURON_RT_VISIBLE_CORES": "3-1"}, "NEURON_RT_VISIBLE_CORES"),
    ({"NEURON_RT_VISIBLE_CORES": "0,0"}, "NEURON_RT_VISIBLE_CORES"),
    ({"NEURON_RT_VISIBLE_CORES": "999"}, "NEURON_RT_VISIBLE_CORES"),
    ({"NEURON_HBM_BYTES": "lots"}, "NEURON_HBM_BYTES"),
    ({"NEURON_HBM_BYTES": "0"}, "NEURON_HBM_BYTES"),
    ({"NEURON_FLOAT64": "maybe"}, "NEURON_FLOAT64"),
    ({"NEURON_COMPILE_GEMM": "mkl"}, "NEURON_COMPILE_GEMM"),
    ({"NEURON_ACCOUNTING": "yes"}, "NEURON_ACCOUNTING"),
    ({"NEURON_EXPECT": "syncs=0,syncs=1"}, "NEURON_EXPECT"),
    ({"NEURON_EXPECT": "speed=0"}, "NEURON_EXPECT"),
    ({"NEURON_EXPECT": "peak_memory=lots"}, "NEURON_EXPECT"),
])
def test_invalid_values_name_the_variable_and_the_accepted_values(env, var):
    with pytest.raises(config.ConfigError, match=rf"{var}=.*accepted values"):
        config.load(env)


BAD_CONFIGURATION_SCRIPT = """
import os, torch
from torchneuron.runtime.config import ConfigError
torch.testing.assert_close(torch.ones(2) * 2, torch.full((2,), 2.0))  # CPU programs work
print("imported", torch.neuron.is_initialized())
calls = [torch.neuron.device_count, torch.neuron.is_available, torch.neuron.init,
         lambda: torch.ones(2, device="neuron"), torch.neuron.memory_allocated]
for call in calls:
    try:
        call()
        print("NO ERROR")
    except ConfigError as e:
        assert isinstance(e, ValueError)
        print("ConfigError:", e)
os.environ.pop(VAR)  # read once: the process keeps the configuration it started with
try:
    torch.neuron.device_count()
except ConfigError as e:
    print("still:", e)
"""


@pytest.mark.parametrize("var,value,accepted", [
    ("NEURON_PROFILE", "trn9", "accepted values: trn2, trn3"),
    ("NEURON_HBM_BYTES", "99999999999999999999999", "below 2**63"),
    ("NEURON_FLOAT64", "maybe", "accepted values: warn, error, allow"),
])
def test_bad_configuration_never_breaks_import_and_names_the_variable(python, var, value,
                                                                      accepted):
    out = python(f"VAR = {var!r}\n" + BAD_CONFIGURATION_SCRIPT, env={var: value})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "imported False"
    errors = lines[1:]
    assert len(errors) == 6, out.stdout
    for line in errors:
        assert f"{var}={value!r} is not valid" in line and accepted in line, line


def test_neuron_expect_reads_each_bound():
    loaded = config.load({"NEURON_EXPECT": "syncs=0, recompiles=3,peak_memory=2GiB"})
    assert loaded.expect == (("syncs", 0), ("recompiles", 3), ("peak_memory", 2 << 30))
    assert not loaded.accounting and config.load({"NEURON_ACCOUNTING": "1"}).accounting


def test_environment_sets_the_devices(python):
    code = ("import torch\n"
            "print(torch.neuron.device_count(), torch.neuron.get_device_properties(1).total_memory)")
    out = python(code, env={"NEURON_RT_VISIBLE_CORES": "0,1", "NEURON_HBM_BYTES": "1GiB"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", str(1 << 30)]
