"""The numeric core of neardup: text -> shingles -> MinHash signature -> LSH band keys.

Pure numpy (and numba kernels); imports nothing from the database side.

    >>> from neardup.core import shingles, MinHasher, estimate_jaccard
    >>> mh = MinHasher(num_perm=128, seed=1)
    >>> a = shingles("The quick brown fox jumps over the lazy dog")
    >>> b = shingles("The quick brown fox jumped over the lazy dog")
    >>> len(set(a) & set(b)) / len(set(a) | set(b))  # exact Jaccard of the 5-shingle sets
    0.7555555555555555
    >>> est = estimate_jaccard(mh.signature(a), mh.signature(b))
    >>> round(est.value, 3), round(est.stderr, 3)  # 94 of 128 rows agree
    (0.734, 0.039)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Imported now: importing the submodule ``neardup.core.normalize`` (as the others do) sets the
# package's ``normalize`` to that module, so the function must be bound here, after it.
from neardup.core.normalize import Normalization, normalize

if TYPE_CHECKING:
    from neardup.core.estimate import JaccardEstimate, agreement, estimate_jaccard, wilson_interval
    from neardup.core.lsh import band_keys
    from neardup.core.minhash import (
        DEFAULT_SCHEME,
        DEFAULT_SEED,
        EMPTY,
        PRIME,
        SCHEMES,
        MinHasher,
        empty_rows,
    )
    from neardup.core.params import HASH_VERSION, Params
    from neardup.core.ragged import Ragged
    from neardup.core.shingle import shingle_batch, shingles
    from neardup.core.sketch import Sketcher
    from neardup.core.tuning import (
        Banding,
        candidate_probability,
        evaluate_banding,
        false_negative_rate,
        false_positive_rate,
        optimal_params,
        threshold_bin_recall,
        threshold_point,
    )

# Where each public name lives. They load on first use (PEP 562), so importing one module of the
# core (as every command does, through the package) does not import all the others.
_HOMES = {
    "estimate": ("JaccardEstimate", "agreement", "estimate_jaccard", "wilson_interval"),
    "lsh": ("band_keys",),
    "minhash": ("DEFAULT_SCHEME", "DEFAULT_SEED", "EMPTY", "PRIME", "SCHEMES", "MinHasher", "empty_rows"),
    "params": ("HASH_VERSION", "Params"),
    "ragged": ("Ragged",),
    "shingle": ("shingle_batch", "shingles"),
    "sketch": ("Sketcher",),
    "tuning": (
        "Banding",
        "candidate_probability",
        "evaluate_banding",
        "false_negative_rate",
        "false_positive_rate",
        "optimal_params",
        "threshold_bin_recall",
        "threshold_point",
    ),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module 'neardup.core' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"neardup.core.{_HOME_OF[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value


__all__ = [
    "DEFAULT_SCHEME",
    "DEFAULT_SEED",
    "EMPTY",
    "HASH_VERSION",
    "PRIME",
    "SCHEMES",
    "Banding",
    "JaccardEstimate",
    "MinHasher",
    "Normalization",
    "Params",
    "Ragged",
    "Sketcher",
    "agreement",
    "band_keys",
    "candidate_probability",
    "empty_rows",
    "estimate_jaccard",
    "evaluate_banding",
    "false_negative_rate",
    "false_positive_rate",
    "normalize",
    "optimal_params",
    "shingle_batch",
    "shingles",
    "threshold_bin_recall",
    "threshold_point",
    "wilson_interval",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
