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

from neardup.core.estimate import JaccardEstimate, agreement, estimate_jaccard, wilson_interval
from neardup.core.lsh import band_keys
from neardup.core.minhash import DEFAULT_SCHEME, DEFAULT_SEED, EMPTY, PRIME, SCHEMES, MinHasher, empty_rows
from neardup.core.normalize import Normalization, normalize
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
    threshold_point,
)

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
    "threshold_point",
    "wilson_interval",
]
