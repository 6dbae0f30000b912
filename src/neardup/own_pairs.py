"""A collection's own pairs just above its threshold: read as a fine histogram, they give the
threshold bin's expected recall (``core.recall_check``) and the density a re-tuning rebuild
designs for (``core.tuning.observed_density``). Approximate as those say."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from neardup.config import FN_WEIGHT, FP_WEIGHT, IndexConfig
from neardup.core.recall_check import RecallCheck, check_recall, sub_bin_edges
from neardup.core.tuning import OWN_DENSITY_MIN_PAIRS, BinDensity, observed_density
from neardup.storage import verified_pairs
from neardup.storage.scope import Scope

# Parameters that change what a pair's similarity is: after a change of one, the stored pairs'
# similarities say nothing of the new ones.
_SIMILARITY_FIELDS = ("shingle", "k", "unicode_form", "case", "collapse_whitespace")


def bin_counts(scope: Scope, threshold: float) -> npt.NDArray[np.int64]:
    """Stored pairs in each sub-bin of [t, t + THRESHOLD_BIN) (``sub_bin_edges``), one statement."""
    edges = sub_bin_edges(threshold)
    counts = verified_pairs.histogram(scope, edges)
    return counts[: max(len(edges) - 1, 1)]


def recall_check(scope: Scope, config: IndexConfig) -> RecallCheck:
    """The threshold bin's expected recall from the collection's own pairs, and the rebuild that
    would restore its target when they put it under (``core.recall_check.check_recall``)."""
    counts = bin_counts(scope, config.threshold)
    return check_recall(
        config.threshold, config.banding(), config.params.recall_at_threshold, counts, FP_WEIGHT, FN_WEIGHT
    )


def own_density(
    scope: Scope, config: IndexConfig, threshold: float, fields: dict[str, object]
) -> BinDensity | None:
    """The density of the stored pairs in [threshold, threshold + THRESHOLD_BIN) for re-tuning
    ``config`` with ``fields`` changed, or None (the prior) where they cannot stand for the
    pairs: fewer than OWN_DENSITY_MIN_PAIRS, a threshold under the collection's (pairs below it
    were never stored), or a change of what a similarity is."""
    if threshold < config.threshold or any(
        name in fields and fields[name] != getattr(config.params, name) for name in _SIMILARITY_FIELDS
    ):
        return None
    counts = bin_counts(scope, threshold)
    if counts.sum() < OWN_DENSITY_MIN_PAIRS:
        return None
    edges = np.array(sub_bin_edges(threshold))
    mids = edges if edges.size == 1 else (edges[:-1] + edges[1:]) / 2.0
    return observed_density(threshold, mids, counts, config.params.bands, config.params.rows)
