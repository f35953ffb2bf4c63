"""The default suite's slice of the model battery: a fixed sample of Hugging Face architectures
(torchneuron/compat/models_sample.py), each built tiny from its config and run on neuron against
the CPU: forward, one training step (loss and every gradient) and greedy generate() where the
head generates. The whole battery is `make compat-models`; its catalogue is checked here too."""

import pytest

pytest.importorskip("transformers")

from torchneuron.compat.models_catalog import architectures, by_type  # noqa: E402
from torchneuron.compat.models_check import NA, PASS, STAGES, check  # noqa: E402
from torchneuron.compat.models_sample import SAMPLE  # noqa: E402


@pytest.mark.parametrize("model_type", SAMPLE)
def test_architecture_matches_cpu(model_type):
    record = check(by_type(model_type))
    failed = {s: record[s] for s in STAGES if record[s] not in (PASS, NA)}
    assert not failed, f"{model_type}: {failed}: {record['cause']}\n{record['traceback']}"
    assert record["forward"] == PASS and record["backward"] == PASS


def test_sample_covers_generation_and_every_family():
    archs = [by_type(t) for t in SAMPLE]
    assert {a.head for a in archs} >= {"causal_lm", "seq2seq_lm", "masked_lm", "ctc",
                                       "sequence_classification"}
    assert len({a.family for a in archs}) >= 6


def test_catalogue_enumerates_the_installed_transformers():
    archs = architectures()
    assert len(archs) > 300  # every model type of the auto mappings, not a hand list
    assert by_type("llama").class_name == "LlamaForCausalLM"
    assert by_type("t5").head == "seq2seq_lm"


def test_unknown_model_type_is_a_clear_error():
    with pytest.raises(KeyError, match="no model type 'not-a-model'"):
        by_type("not-a-model")
