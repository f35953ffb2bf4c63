"""Documented shapes as OmDet-Turbo writes them: a size with a parenthesised note bounding it
below by another size ("total_classes (>= batch_size)"), a type without backticks, integers
documented as "the number of" something (counts, 1 each), and an attention mask whose ids
were made before it (the ids' shape, whatever axis its documentation adds)."""

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from torchneuron.compat.models.documented_shapes import documented_input, documented_shape  # noqa: E402
from torchneuron.compat.models.main_input import main_input  # noqa: E402


class _Noted(torch.nn.Module):
    def forward(self, classes_input_ids, classes_attention_mask, classes_structure, picks,
                other_attention_mask):
        r"""
        classes_input_ids (`torch.LongTensor` of shape `(total_classes (>= batch_size), sequence_length)`):
            Class names, flattened over the tasks.
        classes_attention_mask (`torch.BoolTensor` of shape `(total_classes (>= batch_size), num_classes, sequence_length)`):
            Attention mask for the classes.
        classes_structure (torch.LongTensor of shape `(batch_size)`):
            Structure of the classes. This tensor indicates the number of classes for each task.
        picks (`torch.LongTensor` of shape `(batch_size)`):
            Which class each task picks first.
        other_attention_mask (`torch.BoolTensor` of shape `(batch_size, other_length)`):
            A mask of ids nobody made.
        """


def _model():
    model = _Noted()
    model.config = None
    return model


def test_a_note_is_taken_off_its_size_and_a_type_needs_no_backticks():
    model = _model()
    assert documented_shape(model, "classes_input_ids") == (
        "torch.LongTensor", ["total_classes", "sequence_length"])
    assert documented_shape(model, "classes_structure") == ("torch.LongTensor", ["batch_size"])


def test_a_size_nothing_names_takes_the_size_its_note_bounds_it_by():
    gen = torch.Generator().manual_seed(0)
    ids = documented_input(_model(), "classes_input_ids", {}, gen)
    assert ids.shape == (2, 8) and ids.dtype == torch.long  # total_classes: the batch of 2


def test_integers_documented_as_a_number_of_things_are_counts_of_one():
    gen = torch.Generator().manual_seed(0)
    assert documented_input(_model(), "classes_structure", {}, gen).tolist() == [1, 1]
    assert documented_input(_model(), "picks", {}, gen).tolist() == [0, 0]  # an index: the first


def test_an_attention_mask_takes_the_shape_of_the_ids_it_masks():
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, (3, 7), generator=gen)
    made = main_input(_model(), gen, "classes_attention_mask", known={"classes_input_ids": ids})
    assert made["classes_attention_mask"].shape == ids.shape
    assert made["classes_attention_mask"].all()
    # with no ids of its own made, its documentation decides (other_length: the battery's)
    other = main_input(_model(), gen, "other_attention_mask", known={"classes_input_ids": ids})
    assert other["other_attention_mask"].shape == (2, 8)


class _Bracketed(torch.nn.Module):
    def forward(self, pixel_values):
        r"""
        pixel_values (`list(torch.FloatTensor)` of shape `(batch_size, num_channels, height, width)`):
            A type with brackets of its own, in backticks.
        """


def test_a_type_with_brackets_of_its_own_still_reads():
    model = _Bracketed()
    assert documented_shape(model, "pixel_values") == (
        "list(torch.FloatTensor)", ["batch_size", "num_channels", "height", "width"])
