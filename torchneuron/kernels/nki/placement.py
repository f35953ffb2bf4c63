"""Where on-chip tensors live inside a partition: SBUF and PSUM as byte ranges.

The compiler places a tensor (nl.ndarray without `address=`) itself; a kernel may place one
(`address=(partition_offset, free_offset_in_bytes)`), as AWS's kernel library does for PSUM
banks. Here automatically placed tensors take the first free range (whole 2 KiB banks in PSUM) and
keep their own memory; explicitly placed tensors are views of one memory image per kind, so two
tensors placed at the same address share their bytes as they do on the chip (a PSUM bank shared
by address, a buffer reused for another shape). The rule a placement brings: an explicitly placed
tensor must fit the memory and may not overlap a tensor the compiler placed (rules
`address-range`, `address-overlap`).
"""

from __future__ import annotations

import itertools
import operator

import torch

from .errors import NkiValidationError

_START = operator.itemgetter(0)  # live ranges sort by their first byte


class OnChipMemory:
    """The live ranges of one memory kind (sbuf or psum) during a kernel run."""

    def __init__(self, kind: str, partitions: int, bytes_per_partition: int, granule: int):
        self.kind = kind
        self.partitions = partitions
        self.capacity = bytes_per_partition
        self.granule = granule  # automatic placement unit: 1 byte (SBUF), one bank (PSUM)
        self.live: dict[int, tuple[int, int, int, int, bool, str]] = {}
        self._tokens = itertools.count()
        self.image: torch.Tensor | None = None  # the bytes of explicitly placed tensors
        self.written: dict[torch.dtype, torch.Tensor] = {}  # PSUM: elements matmul wrote

    def place_auto(self, nbytes: int, label: str) -> tuple[int, int] | None:
        """(token, start) of the first free range of `nbytes` (rounded to the granule)."""
        size = -(-nbytes // self.granule) * self.granule
        start = 0
        for s, e, *_ in sorted(self.live.values(), key=_START):
            if start + size <= s:
                break
            start = max(start, -(-e // self.granule) * self.granule)
        if start + size > self.capacity:
            return None
        token = next(self._tokens)
        self.live[token] = (start, start + size, 0, self.partitions, False, label)
        return token, start

    def place_explicit(self, p0: int, partitions: int, start: int, nbytes: int,
                       label: str) -> int:
        if p0 < 0 or start < 0 or p0 + partitions > self.partitions \
                or start + nbytes > self.capacity:
            raise NkiValidationError(
                "address-range", f"nl.ndarray {label}: address ({p0}, {start}) places "
                f"partitions {p0}..{p0 + partitions - 1} and bytes {start}..{start + nbytes - 1} "
                f"of each partition; {self.kind.upper()} has {self.partitions} partitions of "
                f"{self.capacity} bytes")
        for s, e, q0, q1, explicit, other in self.live.values():
            if not explicit and start < e and s < start + nbytes and p0 < q1 and q0 < p0 + partitions:
                raise NkiValidationError(
                    "address-overlap", f"nl.ndarray {label}: bytes {start}..{start + nbytes - 1}"
                    f" of partitions {p0}..{p0 + partitions - 1} overlap {other}, which the "
                    f"compiler placed at bytes {s}..{e - 1}; place every tensor of the region "
                    "explicitly, or none")
        token = next(self._tokens)
        self.live[token] = (start, start + nbytes, p0, p0 + partitions, True, label)
        return token

    def release(self, token: int) -> None:
        self.live.pop(token, None)

    def bytes_image(self, fill: bool) -> torch.Tensor:
        """The flat bytes of the memory (partition-major), created at the first placement;
        new memory reads as 0xFF bytes (NaN in every float format)."""
        if self.image is None:
            self.image = torch.full((self.partitions * self.capacity,), 0xFF, dtype=torch.uint8) \
                if fill else torch.empty(self.partitions * self.capacity, dtype=torch.uint8,
                                         device="meta")
        return self.image

    def written_mask(self, storage_dtype: torch.dtype, numel: int) -> torch.Tensor:
        if storage_dtype not in self.written:
            self.written[storage_dtype] = torch.zeros(numel, dtype=torch.bool)
        return self.written[storage_dtype]
