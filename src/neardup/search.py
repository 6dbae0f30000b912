"""Looking a text up in a collection: its bucket neighbours, verified like an ingest's candidates."""

from __future__ import annotations

import numpy as np

from neardup.config import IndexConfig
from neardup.core.ragged import concat
from neardup.core.sketch import Sketcher
from neardup.core.verify import exact_jaccard, prefilter_floor, signature_agreement
from neardup.errors import InputError, ParamsError
from neardup.storage import buckets
from neardup.storage.scope import Scope


def similar(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    min_jaccard: float | None = None,
    limit: int | None = None,
) -> list[tuple[str, float]]:
    """Stored documents similar to ``text``, best first: (id, similarity). See ``Index.query``."""
    if not isinstance(text, str):
        raise InputError(f"query text must be a string, got {type(text).__name__}")
    floor = config.threshold if min_jaccard is None else _fraction(min_jaccard, "min_jaccard")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ParamsError(f"limit must be a non-negative integer, got {limit!r}")
    sketch = sketcher.sketch([text])
    if sketch.shingle_counts[0] == 0:
        return []
    found = buckets.lookup(scope, sketcher.band_keys(sketch.signatures)[0], config.store_text)
    if not found:
        return []
    n = len(found)
    sigs = np.concatenate([sketch.signatures, np.stack([r[1] for r in found])])
    zeros, others = np.zeros(n, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64)
    sim = signature_agreement(sigs, zeros, others)
    if config.store_text:
        hopeful = np.flatnonzero(
            sim >= (prefilter_floor(floor, config.params.num_perm) if floor > 0 else 0.0)
        )
        sets = concat(
            sketch.distinct_shingles(np.zeros(1, np.int64)), sketcher.shingles([found[i][2] for i in hopeful])
        )
        sim = np.zeros(n)
        sim[hopeful] = exact_jaccard(sets, np.zeros(hopeful.size, np.int64), np.arange(1, hopeful.size + 1))
    results = [(doc_id, float(sim[i])) for i in np.flatnonzero(sim >= floor) for doc_id in found[i][3]]
    results.sort(key=lambda r: (-r[1], r[0]))
    return results[:limit] if limit is not None else results


def _fraction(value: object, name: str) -> float:
    """``value`` as a float in [0, 1], else ParamsError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise ParamsError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)
