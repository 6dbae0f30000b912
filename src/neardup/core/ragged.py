"""Ragged batches: many variable-length arrays stored as one flat array plus offsets."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, eq=False)
class Ragged:
    """Document ``i`` owns ``values[offsets[i]:offsets[i + 1]]``; ``offsets`` has ``len + 1`` entries."""

    values: npt.NDArray[np.generic]
    offsets: npt.NDArray[np.int64]

    @classmethod
    def from_arrays(cls, arrays: Sequence[npt.ArrayLike], dtype: npt.DTypeLike) -> Ragged:
        """Concatenate arrays into one batch (each converted to ``dtype``)."""
        parts = [np.asarray(a, dtype=dtype).ravel() for a in arrays]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([p.shape[0] for p in parts], out=offsets[1:])
        values = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
        return cls(values, offsets)

    def __len__(self) -> int:
        return int(self.offsets.shape[0] - 1)

    def __getitem__(self, i: int) -> npt.NDArray[np.generic]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"document {i} out of range for a batch of {len(self)}")
        i %= len(self)
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[npt.NDArray[np.generic]]:
        for i in range(len(self)):
            yield self.values[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> npt.NDArray[np.int64]:
        """Number of values of each document."""
        return np.diff(self.offsets)

    def take(self, rows: npt.NDArray[np.int64]) -> Ragged:
        """The documents ``rows``, in that order (without a Python loop)."""
        lengths = self.lengths()[rows]
        offsets = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        at = np.repeat(self.offsets[:-1][rows] - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Ragged(self.values[at], offsets)


def concat(*parts: Ragged) -> Ragged:
    """The documents of each part in turn, as uint32 values (shingle sets)."""
    values = np.concatenate([np.asarray(part.values, np.uint32) for part in parts])
    ends = np.cumsum([0] + [int(part.offsets[-1]) for part in parts[:-1]])
    offsets = np.concatenate(
        [parts[0].offsets[:1], *(part.offsets[1:] + end for part, end in zip(parts, ends, strict=True))]
    )
    return Ragged(values, offsets.astype(np.int64))
