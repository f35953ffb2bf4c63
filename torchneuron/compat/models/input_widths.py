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
# The same said by a sum on the input's last axis (Fun-ASR-Nano adds a position encoding as wide
# as its low-frame-rate features, seven mel frames side by side).
# A length the model needs a multiple of, on the input's last axis (Qwen3-ASR's encoder cuts
# its frames into windows of n_window * 2, MuseSpark's audio encoder its samples into frames).
_MULTIPLE = re.compile(r"to be a multiple of [^()]*\((?P<want>\d+)\), but got (?P<got>\d+)|"
                       r"length (?P<got2>\d+) is not a multiple of (?P<want2>\d+)")
_SUM = re.compile(r"The size of tensor a \((?P<got>\d+)\) must match the size of tensor b "
                  r"\((?P<want>\d+)\) at non-singleton dimension (?P<axis>\d+)")


def input_widths(model) -> dict[str, int]:
    return getattr(model, ATTRIBUTE, None) or {}


def fit_input_width(model, inputs: dict[str, torch.Tensor], e: BaseException) -> bool:
    """Where `e` is a matrix product whose input is narrower or wider than its weight (or a sum
    on the input's last axis with a tensor of another width, or a length that must be a
    multiple of a window), records
    for the input that feeds it the width the weight takes: the floating input as wide as the
    product's input (the last made of several: the main input comes first, sized by the config,
    and companions after it: MuseGlimmer's assistant takes states of several target layers side
    by side), else the only floating input, by the same difference (a model that drops leading
    columns). True if it recorded one it had not."""
    message = str(e) if isinstance(e, (RuntimeError, ValueError)) else ""
    match = _PRODUCT.search(message) or _SUM.search(message) or _MULTIPLE.search(message)
    if not match:
        return False
    got, want = (int(match[g] or match[f"{g}2"] if f"{g}2" in match.re.groupindex else match[g])
                 for g in ("got", "want"))
    if got == want:
        return False
    if match.re is _MULTIPLE:
        want = -(-got // want) * want  # the next multiple
    floats = {n: x for n, x in inputs.items() if isinstance(x, torch.Tensor) and x.is_floating_point()
              and x.dim() >= 2}
    if "axis" in match.re.groupindex:  # a sum: only an input whose last axis is the one named
        floats = {n: x for n, x in floats.items() if x.dim() - 1 == int(match["axis"])}
    feeding = [n for n, x in floats.items() if x.shape[-1] == got]
    if feeding:
        name, width = feeding[-1], want
    elif len(floats) == 1 and match.re is _PRODUCT:
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
