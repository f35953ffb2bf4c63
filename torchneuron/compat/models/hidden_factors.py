"""The last shrink profile: a hidden size that keeps the factor of three its default has. The
battery's hidden size (64) is a power of two; some models cut the hidden size into a number of
parts that is not (LiLT's layout embeddings take hidden_size // 6 for each of six box
coordinates, LayoutLMv3's four coordinate_size and two shape_size embeddings sum to it), and a
hidden size that is no multiple of six makes their sum narrower than the width it is added to.
Widths the defaults make a whole fraction of the hidden size (768 / 6 = 128) stay that fraction.
Tried after every other profile, so no model that runs with another one changes."""

from __future__ import annotations

import re

PROFILE = "hidden size keeps its factor of three"
FACTOR = 3
_WIDTH = re.compile(r"_(dim|size)$")


def keep_factor_of_three(d: dict, out: dict, hidden: int) -> None:
    """`d` the default config dict, `out` its shrunk version (changed in place); `hidden` the
    battery's hidden size. Where the default hidden_size is a multiple of three, the shrunk one
    is `hidden` * 3 / 2, and widths left at their default that divide the default hidden size
    become the same fraction of the new one."""
    full = d.get("hidden_size")
    if not isinstance(full, int) or isinstance(full, bool) or full % FACTOR \
            or not isinstance(out.get("hidden_size"), int):
        return
    new = hidden // 2 * FACTOR
    out["hidden_size"] = new
    for key, value in d.items():
        if isinstance(key, str) and key != "hidden_size" and _WIDTH.search(key) \
                and isinstance(value, int) and not isinstance(value, bool) and 0 < value < full \
                and full % value == 0 and out.get(key) == value and new % (full // value) == 0:
            out[key] = new // (full // value)
