"""NEURON_FUSION_HOT: how often a chain is seen before it is compiled."""

import pytest

from torchneuron.runtime.config import ConfigError, load


def test_default_and_explicit_hotness():
    assert load({}).fusion_hot == 3
    assert load({"NEURON_FUSION_HOT": " 1 "}).fusion_hot == 1
    assert load({"NEURON_FUSION_HOT": "20"}).fusion_hot == 20


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", ""])
def test_bad_hotness_names_the_variable_and_the_accepted_values(value):
    with pytest.raises(ConfigError, match=r"NEURON_FUSION_HOT=.* is not valid; accepted values: "
                                          r"a whole number of times, at least 1"):
        load({"NEURON_FUSION_HOT": value})
