"""The default suite's slice of the model battery: a fixed sample of Hugging Face architectures
(torchneuron/compat/models/sample.py), each built tiny from its config and run on neuron against
the CPU: forward, one training step (loss and every gradient) and greedy generate() where the
head generates. The whole battery is `make compat-models`; its catalogue is checked here too."""

import pytest

pytest.importorskip("transformers")

from torchneuron.compat.models.catalog import architectures, by_type  # noqa: E402
from torchneuron.compat.models.check import NA, PASS, STAGES, check  # noqa: E402
from torchneuron.compat.models.sample import SAMPLE  # noqa: E402


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


def test_an_architecture_that_kills_its_worker_is_a_crash_and_the_battery_goes_on():
    # The model battery on the shared pool: the worker dies (SIGSEGV) in the first architecture,
    # which is recorded as a crash with the exit code; the next one runs in a fresh worker.
    import os
    import signal

    from torchneuron.compat import pool
    from torchneuron.compat.models.jobs import BATTERY

    records, killed = {}, []

    def kill_first(arch, case, pid):
        if not killed:
            killed.append(pid)
            os.kill(pid, signal.SIGSEGV)

    def done(arch, recs, seconds):
        records[arch.model_type] = recs

    pool.run([by_type("bert"), by_type("gpt2")], BATTERY, 1, 300, done, kill_first)
    assert [r["build"] for r in records["bert"]] == ["crash"]
    assert records["bert"][0]["cause"] == "crash: worker exited with code -11"
    assert [r["forward"] for r in records["gpt2"]] == [PASS]
