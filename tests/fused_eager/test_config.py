"""NEURON_FUSION_HOT: how often a chain is seen before it is compiled; NEURON_EAGER_MODE's fused
mode and TorchTPU's names for the others."""

import pytest

from torchneuron.runtime.config import ConfigError, load


def test_default_and_explicit_hotness():
    assert load({}).fusion_hot == 20
    assert load({"NEURON_FUSION_HOT": " 1 "}).fusion_hot == 1
    assert load({"NEURON_FUSION_HOT": "20"}).fusion_hot == 20


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_bad_hotness_names_the_variable_and_the_accepted_values(value):
    with pytest.raises(ConfigError, match=r"NEURON_FUSION_HOT=.* is not valid; accepted values: "
                                          r"a whole number of times, at least 1"):
        load({"NEURON_FUSION_HOT": value})


def test_eager_modes_and_torchtpu_names():
    assert load({"NEURON_EAGER_MODE": "fused"}).eager_mode == "fused"
    assert load({"NEURON_EAGER_MODE": " Fused "}).eager_mode == "fused"
    assert load({"NEURON_EAGER_MODE": "debug"}).eager_mode == "sync"
    assert load({"NEURON_EAGER_MODE": "strict"}).eager_mode == "async"
    assert load({}).eager_mode == "async"


def test_bad_eager_mode_names_every_accepted_value():
    with pytest.raises(ConfigError, match=r"NEURON_EAGER_MODE=.*fusd.* is not valid; accepted "
                                          r"values: sync, async, fused, debug, strict"):
        load({"NEURON_EAGER_MODE": "fusd"})
