"""The default suite's slices of the diffusers, PEFT and sentence-transformers batteries: one
model class and one pipeline, two PEFT methods on two architectures, and MiniLM's encode, each on
neuron against the CPU. The full batteries are `make compat-all` and the slow suite."""

import pytest

pytest.importorskip("diffusers")
pytest.importorskip("peft")

from torchneuron.compat.staged import NA, PASS, quiet, run_case, select  # noqa: E402


def _check(cases, stages):
    quiet()
    for case in cases:
        rec = run_case(case, stages)
        assert all(rec[s] in (PASS, NA) for s in stages), f"{case.name}: {rec['cause']}\n{rec['traceback']}"
        assert all(rec[s] == PASS for s in case.stages)


def test_diffusers_unet_and_ddpm_pipeline_match_cpu():
    from torchneuron.compat.diffusion.command import STAGES, cases

    _check(select(cases(), ["UNet2DModel", "DDPMPipeline"]), STAGES)


def test_peft_lora_on_a_decoder_and_prompt_tuning_on_an_encoder_decoder_match_cpu():
    from torchneuron.compat.adapters.cases import cases
    from torchneuron.compat.adapters.command import STAGES

    _check(select(cases(), ["lora / decoder", "prompt_tuning / encoder-decoder"]), STAGES)


def test_sentence_transformers_encode_matches_cpu():
    from torchneuron.compat.sentences.cases import cases
    from torchneuron.compat.sentences.command import STAGES

    _check(select(cases(), ["*encode"]), STAGES)


def test_the_catalogues_cover_what_the_issue_asks():
    from torchneuron.compat.adapters.cases import cases as peft_cases
    from torchneuron.compat.diffusion.command import cases as diffusers_cases

    names = {c.name for c in diffusers_cases()}
    assert {"DDPMPipeline", "StableDiffusionPipeline", "DiTPipeline", "UNet2DConditionModel",
            "AutoencoderKL", "ControlNetModel"} <= names
    assert len(peft_cases()) == 15  # 5 methods x (decoder, encoder, encoder-decoder)
