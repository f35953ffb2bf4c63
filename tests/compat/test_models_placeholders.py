"""Token ids beside an image carry one placeholder per feature vector the model makes of the
image (as the model's processor writes them), counted with the model's own
get_image_features; an image token id the defaults leave unset gets one in the tiny
vocabulary; and a generate() whose forward needed every modality gets them all."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.inputs import forward_inputs  # noqa: E402
from torchneuron.compat.models.shrink import PLACEHOLDER_ID, shrink_dict  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_an_unset_placeholder_id_gets_one_and_other_unset_ids_stay_unset():
    out = shrink_dict({"vocab_size": 32000, "image_token_index": None, "pad_token_id": None})
    assert out["image_token_index"] == PLACEHOLDER_ID and out["pad_token_id"] is None


@pytest.mark.parametrize("model_type, class_name", [
    ("blip-2", "Blip2ForConditionalGeneration"),
    ("instructblip", "InstructBlipForConditionalGeneration")])
def test_image_and_text_run_with_one_placeholder_per_image_feature(model_type, class_name):
    import transformers

    config = tiny_config(model_type)
    torch.manual_seed(0)
    model = getattr(transformers, class_name)(config).eval()
    inputs = forward_inputs(model, "causal_lm", torch.Generator().manual_seed(0), every_modality=True)
    placeholders = (inputs["input_ids"] == config.image_token_id).sum(1)
    assert placeholders.tolist() == [config.num_query_tokens] * 2
    with torch.no_grad():
        out = model(**inputs)
    assert out.logits.shape[:2] == inputs["input_ids"].shape
    with torch.no_grad():
        ids = model.generate(**inputs, max_new_tokens=2, do_sample=False)
    assert ids.shape[0] == 2
