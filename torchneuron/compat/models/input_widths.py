"""Feature widths the model's first projection names. Some inputs are wider than any config
size says: a processor stacks frames or adds columns (Granite Speech 5's features are mel bins
delta-expanded and stacked in pairs, four times the bins; Pix2Struct's flattened patches carry
a row and a column index before the pixels). The first matrix product then names the width it
takes ("mat1 and mat2 shapes cannot be multiplied (128x80 and 320x64)"); the battery gives that
input that width, as it follows the size rules a config class names when it validates."""

from __future__ import annotations

import re

import torch

ATTRIBUTE = "battery_input_widths"  # on the model: {input name: width}, carried by deepcopy and .to()
_PRODUCT = re.compile(r"mat1 and mat2 shapes cannot be multiplied \(\d+x(?P<got>\d+) and (?P<want>\d+)x\d+\)")


def input_widths(model) -> dict[str, int]:
    return getattr(model, ATTRIBUTE, None) or {}


def fit_input_width(model, inputs: dict[str, torch.Tensor], e: BaseException) -> bool:
    """Where `e` is a matrix product whose input is narrower or wider than its weight, records
    for the input that feeds it the width the weight takes: the floating input as wide as the
    product's input, else the only floating input, by the same difference (a model that drops
    leading columns). True if it recorded one it had not."""
    match = _PRODUCT.search(str(e)) if isinstance(e, RuntimeError) else None
    if not match or match["got"] == match["want"]:
        return False
    got, want = int(match["got"]), int(match["want"])
    floats = {n: x for n, x in inputs.items() if isinstance(x, torch.Tensor) and x.is_floating_point()
              and x.dim() >= 2}
    feeding = [n for n, x in floats.items() if x.shape[-1] == got]
    if feeding:
        name, width = feeding[0], want
    elif len(floats) == 1:
        name = next(iter(floats))
        width = floats[name].shape[-1] + want - got
    else:
        return False
    widths = input_widths(model)
    if width <= 0 or name in widths:
        return False
    setattr(model, ATTRIBUTE, {**widths, name: width})
    return True


def with_input_widths(model, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inputs with the recorded widths: the last axis cut, or repeated, to that width."""
    out = dict(inputs)
    for name, width in input_widths(model).items():
        x = out.get(name)
        if x is None or x.shape[-1] == width:
            continue
        repeats = -(-width // x.shape[-1])
        out[name] = x.repeat(*[1] * (x.dim() - 1), repeats)[..., :width].contiguous()
    return out
