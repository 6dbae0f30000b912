"""Random set pairs of exactly known Jaccard similarity, for the statistical tests."""

import numpy as np
import numpy.typing as npt

Sets = list[npt.NDArray[np.uint32]]


def pairs_with_jaccard(
    rng: np.random.Generator, count: int, union: int, jaccard: float
) -> tuple[Sets, Sets, float]:
    """``count`` pairs (A, B) with |A u B| = union and |A n B| = round(jaccard * union)."""
    inter = round(jaccard * union)
    left: Sets = []
    right: Sets = []
    for _ in range(count):
        u = rng.choice(2**32, size=union, replace=False).astype(np.uint32)
        common, rest = u[:inter], u[inter:]
        cut = int(rng.integers(0, rest.shape[0] + 1))
        left.append(np.concatenate([common, rest[:cut]]))
        right.append(np.concatenate([common, rest[cut:]]))
    return left, right, inter / union
