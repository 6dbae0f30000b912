"""Text fingerprints by winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003): a consistent sample
of a text's longer grams, so that two texts sharing a long enough run of text share a fingerprint
whatever their sizes. The index of a collection's ``neighbours`` finds top-k and containment
candidates with them; every answer is then verified exactly on the shingle sets.

A gram joins two shingles ``step`` positions apart (for character shingles of length k with step
k, 2k characters); the fingerprints of a text are the minima of every window of ``WINDOW``
consecutive grams, each distinct value once. Any run of ``WINDOW + step`` shingles (about
``WINDOW + 2k - 1`` characters) that two texts share gives both the same window, so the same
minimum: that is the guarantee, and the only one (shorter shared runs are found by chance).
A text with fewer grams than a window has its grams' minimum, and a text with fewer shingles than
``step + 1`` its shingles' hashes as grams.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged

# Grams a window: a power of two (the window minimum doubles its span log2(WINDOW) times).
# The sample's density is about 2 / (WINDOW + 1) of a text's grams, and a shared run must be about
# WINDOW + 2k - 1 characters to be certain to share a fingerprint: 32 keeps short (Debian-sized)
# excerpts in reach at about one row per 16 characters of text.
WINDOW = 32
_MIX = np.uint64(0x9E3779B97F4A7C15)
# A query also probes each of its grams below this share of the hash range: a window's minimum of
# WINDOW values lies below it with probability 1 - (1 - PROBE_SHARE) ** WINDOW (0.994 at 32), so a
# stored text's fingerprints inside any run it shares with the query are found even where the run
# is shorter than the guarantee (an edited copy, a short excerpt).
PROBE_SHARE = 0.15
_PROBE_BELOW = np.uint64(int(PROBE_SHARE * 2.0**64))


def _mixed(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A fixed bijective mix of 64-bit values, so that window minima are spread over the grams."""
    with np.errstate(over="ignore"):
        x = values * _MIX
        x ^= x >> np.uint64(29)
        x *= _MIX
        x ^= x >> np.uint64(32)
    return x


def grams(shingles: Ragged, step: int) -> Ragged:
    """Each text's grams (as shingled, in text order): shingle hashes ``i`` and ``i + step`` joined."""
    lengths = shingles.lengths()
    values = shingles.values.astype(np.uint64)
    n = values.size
    pos = np.arange(n, dtype=np.int64)
    owner = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    end = shingles.offsets[1:][owner] if n else np.empty(0, np.int64)
    paired = pos + step < end
    short = (lengths <= step)[owner] if n else np.zeros(0, bool)
    keep = paired | short
    joined = np.where(paired, (values << np.uint64(32)) | values[np.minimum(pos + step, n - 1)], values)
    counts = np.bincount(owner[keep], minlength=lengths.size).astype(np.int64)
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Ragged(_mixed(joined[keep]), offsets)


def winnow(gram_sets: Ragged, window: int = WINDOW) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(text row, fingerprint) of each distinct window minimum of each text, sorted by both; the
    fingerprints as signed 64-bit values (the same bits)."""
    if window < 1 or window & (window - 1):
        raise ValueError(f"window must be a power of two, got {window}")
    values, lengths = gram_sets.values.astype(np.uint64), gram_sets.lengths()
    # low[i] = min(values[i : i + window]), spanning text ends (those windows are not used).
    low, span = values.copy(), 1
    while span < window:
        shifted = np.full(low.size, np.iinfo(np.uint64).max, dtype=np.uint64)
        shifted[: max(low.size - span, 0)] = low[span:]
        np.minimum(low, shifted, out=low)
        span *= 2
    starts, ends = gram_sets.offsets[:-1], gram_sets.offsets[1:]
    full = lengths >= window
    # Window starts of texts with a whole window: offsets[t] .. offsets[t + 1] - window.
    counts = np.where(full, lengths - window + 1, 0)
    owner = np.repeat(np.arange(lengths.size, dtype=np.int64), counts)
    first = np.repeat(starts - np.r_[0, np.cumsum(counts)[:-1]], counts)
    at = first + np.arange(owner.size, dtype=np.int64)
    rows, picks = [owner], [low[at]]
    small = np.flatnonzero(~full & (lengths > 0))
    if small.size:
        rows.append(small)
        # Each short text's minimum: reduceat over [start, end) pairs (a sentinel past the end).
        bounds = np.stack([starts[small], ends[small]], axis=1).ravel()
        padded = np.append(values, np.iinfo(np.uint64).max)
        picks.append(np.minimum.reduceat(padded, bounds)[::2])
    row, fp = np.concatenate(rows), np.concatenate(picks).view(np.int64)
    # Neighbouring windows mostly share their minimum: drop those repeats before sorting.
    fresh = np.ones(row.size, dtype=bool)
    fresh[1:] = (row[1:] != row[:-1]) | (fp[1:] != fp[:-1])
    row, fp = row[fresh], fp[fresh]
    order = np.lexsort((fp, row))
    row, fp = row[order], fp[order]
    fresh = np.ones(row.size, dtype=bool)
    fresh[1:] = (row[1:] != row[:-1]) | (fp[1:] != fp[:-1])
    return row[fresh], fp[fresh]


def fingerprints(
    shingles: Ragged, step: int, window: int = WINDOW
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(text row, fingerprint) pairs of each text's distinct fingerprints (see the module)."""
    return winnow(grams(shingles, step), window)


def fingerprints_of(
    parts: Sequence[Ragged], rows: npt.NDArray[np.int64], step: int, window: int = WINDOW
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(position in ``rows``, fingerprint) pairs of the texts ``rows`` of a batch whose shingles
    (as shingled) come in ``parts`` (a sketch's chunks, rows numbered across them)."""
    found_at, found_fp = [], []
    start = 0
    for part in parts:
        inside = (rows >= start) & (rows < start + len(part))
        if inside.any():
            local = rows[inside] - start
            lengths = part.lengths()[local]
            offsets = np.zeros(local.size + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            picked = np.concatenate([part[int(i)] for i in local.tolist()]) if local.size else part.values[:0]
            row, fp = fingerprints(Ragged(picked, offsets), step, window)
            found_at.append(np.flatnonzero(inside)[row])
            found_fp.append(fp)
        start += len(part)
    if not found_at:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(found_at), np.concatenate(found_fp)


def probes(shingles: Ragged, step: int, window: int = WINDOW) -> npt.NDArray[np.int64]:
    """The distinct keys a query of one text (``shingles``, one row) looks up: its fingerprints,
    and its grams that could be a stored text's (below ``PROBE_SHARE`` of the hash range)."""
    gram_sets = grams(shingles, step)
    _, fp = winnow(gram_sets, window)
    low = gram_sets.values[gram_sets.values < _PROBE_BELOW].view(np.int64)
    return distinct(np.concatenate([fp, low]))


__all__ = ["PROBE_SHARE", "WINDOW", "fingerprints", "fingerprints_of", "grams", "probes", "winnow"]
