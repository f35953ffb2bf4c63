"""Models whose config names no image size get, as a further input layout, images at the size
their image processor resizes to, read from the processor class's defaults (most processors
here need torchvision, which cannot be imported): a text-line recognizer takes 48 x 320."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.main_input import main_input, processor_image_size  # noqa: E402
from torchneuron.compat.models.tiny_config import tiny_config  # noqa: E402


def test_the_processor_size_is_read_from_its_class_defaults():
    assert processor_image_size("pp_ocrv6_tiny_rec") == (48, 320)
    assert processor_image_size("vit") == (224, 224)
    assert processor_image_size("llama") is None  # no image processor


def test_a_text_line_recognizer_runs_at_its_processor_size_and_not_at_a_small_square():
    from transformers import PPOCRV6TinyRecModel

    model = PPOCRV6TinyRecModel(tiny_config("pp_ocrv6_tiny_rec")).eval()
    gen = torch.Generator().manual_seed(0)
    inputs = main_input(model, gen, layout="processor image size")
    assert inputs["pixel_values"].shape[-2:] == (48, 320)
    with torch.no_grad():
        out = model(**inputs)
        with pytest.raises(RuntimeError, match="too small"):
            model(**main_input(model, gen))
    assert torch.isfinite(out.last_hidden_state).all()


def test_processor_sizes_past_the_cap_are_not_tried():
    from transformers import PPOCRV6SmallDetModel

    from torchneuron.compat.models.catalog import by_type
    from torchneuron.compat.models.check import MAX_PROCESSOR_SIDE, _layouts

    assert max(processor_image_size("pp_ocrv6_small_det")) > MAX_PROCESSOR_SIDE
    model = PPOCRV6SmallDetModel(tiny_config("pp_ocrv6_small_det"))
    assert "processor image size" not in _layouts(model, by_type("pp_ocrv6_small_det"))
