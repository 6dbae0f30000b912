"""A text's nearest stored documents (top-k by Jaccard) and the stored documents that contain it or
that it contains, for a collection that keeps its neighbours (``neighbours=True``).

Candidates are the stored contents with a fingerprint (``core.fingerprints``) among the text's
probes (its own fingerprints and its grams low enough to be one), ranked by how many; each is
verified exactly on the shingle sets (``ingest.verification.verify_overlaps``), so every answer is
exact (precision 1) and recall is what the probes find: certain for a shared run of text of about
``WINDOW + 2k`` characters, likely for a stored text with a fingerprint inside any shared run.
A top-k query does not use fingerprints held by more than ``COMMON`` stored contents (boilerplate)
while rarer ones are there; a containment query uses every one (its answers may be that many).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np
import numpy.typing as npt

from neardup.config import IndexConfig
from neardup.core.fingerprints import probes
from neardup.core.sketch import Sketcher
from neardup.errors import InputError, ParamsError
from neardup.ingest.verification import Overlaps, verify_overlaps
from neardup.storage import documents
from neardup.storage import fingerprints as stored_fingerprints
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, read_snapshot

Direction = Literal["contains", "within"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)

# A fingerprint held by more contents than this is boilerplate: a candidate found only through
# such fingerprints is rarely an answer, and reading them all would cost more than the rest.
COMMON = 1_000
# A top-k query verifies this many candidates a wanted answer, the most-shared first (at least
# TOP_MIN): the nearest documents share the most fingerprints, bar a few that share boilerplate.
TOP_FACTOR, TOP_MIN = 10, 100


class Contained(NamedTuple):
    """A stored document that contains the text or is contained in it, with the exact share
    (``containment``) and the exact Jaccard."""

    id: str
    containment: float
    jaccard: float


def top_k(value: object) -> int:
    """``value`` as a count of answers (a positive integer), else ParamsError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParamsError(f"top_k must be a positive integer, got {value!r}")
    return value


def min_containment(value: object) -> float:
    """``value`` as a containment threshold in (0, 1], else ParamsError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 < float(value) <= 1.0:
        raise ParamsError(f"min_containment must be in (0, 1], got {value!r}")
    return float(value)


def direction(value: object) -> Direction:
    """``value`` as a containment direction, else ParamsError."""
    if value not in DIRECTIONS:
        raise ParamsError(f"direction must be one of {', '.join(DIRECTIONS)}, got {value!r}")
    return value  # type: ignore[return-value]


def require_neighbours(config: IndexConfig, name: str) -> None:
    """ParamsError, saying how to enable them, unless the collection keeps its neighbours."""
    if not config.params.neighbours:
        raise ParamsError(
            f"collection {name!r} keeps no neighbours, so it answers neither top-k nor containment: "
            "rebuild it with them (neardup rebuild --neighbours, or Index.rebuild(neighbours=True))"
        )


def nearest(
    scope: Scope, config: IndexConfig, sketcher: Sketcher, text: str, k: int
) -> list[tuple[str, float]]:
    """The ``k`` stored documents most similar to ``text`` with Jaccard at least the collection's
    ``neighbour_floor``, best first: (id, exact Jaccard). Approximate only in what it finds."""
    k = top_k(k)
    with transaction(scope.conn):
        read_snapshot(scope.conn)
        ids, _ = _candidates(scope, sketcher, _text(text), config.params.k, COMMON)
        ids = ids[: max(TOP_FACTOR * k, TOP_MIN)]
        overlaps, names = _verified(scope, sketcher, text, ids)
    floor = config.params.neighbour_floor
    jaccard = overlaps.jaccard().tolist()
    found = [(n, j) for i, j in zip(ids.tolist(), jaccard, strict=True) if j >= floor for n in names[i]]
    found.sort(key=lambda r: (-r[1], r[0]))
    return found[:k]


def containing(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    threshold: float,
    way: Direction = "contains",
) -> list[Contained]:
    """The stored documents that contain at least ``threshold`` of ``text``'s shingles, or with
    ``way="within"`` those whose shingles ``text`` contains at least ``threshold`` of; largest
    share first, each with its exact share and Jaccard. Approximate only in what it finds."""
    threshold, way = min_containment(threshold), direction(way)
    with transaction(scope.conn):
        read_snapshot(scope.conn)
        # Every candidate: a short or generic text is contained in many stored ones, all answers.
        ids, _ = _candidates(scope, sketcher, _text(text), config.params.k, None)
        overlaps, names = _verified(scope, sketcher, text, ids)
    share = (overlaps.contained() if way == "contains" else overlaps.within()).tolist()
    jaccard = overlaps.jaccard().tolist()
    found = [
        Contained(n, c, j)
        for i, c, j in zip(ids.tolist(), share, jaccard, strict=True)
        if c >= threshold
        for n in names[i]
    ]
    found.sort(key=lambda r: (-r.containment, -r.jaccard, r.id))
    return found


def _text(text: object) -> str:
    if not isinstance(text, str):
        raise InputError(f"query text must be a string, got {type(text).__name__}")
    return text


def _candidates(
    scope: Scope, sketcher: Sketcher, text: str, step: int, common: int | None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Stored contents with a fingerprint among ``text``'s probes and how many, the most first
    (ties by content id); with ``common``, through its rarer fingerprints only, when it has any."""
    fp = probes(sketcher.shingles([text], unique=False), step)
    if fp.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    found, content = stored_fingerprints.lookup(scope, fp, None if common is None else common + 1)
    if common is not None:
        keys, held = np.unique(found, return_counts=True)
        rare = ~np.isin(found, keys[held > common])
        if rare.any():
            content = content[rare]
    ids, shared = np.unique(content, return_counts=True)
    order = np.lexsort((ids, -shared))
    return ids[order], shared[order]


def _verified(
    scope: Scope, sketcher: Sketcher, text: str, ids: npt.NDArray[np.int64]
) -> tuple[Overlaps, dict[int, list[str]]]:
    """The exact overlaps of ``text`` with the stored contents ``ids``, and their documents' ids."""
    wanted = ids.tolist()
    texts = documents.texts(scope, wanted) if wanted else {}
    names = documents.external_ids(scope, wanted) if wanted else {}
    return verify_overlaps(sketcher, text, [texts[i] for i in wanted]), names


__all__ = [
    "DIRECTIONS",
    "Contained",
    "Direction",
    "containing",
    "direction",
    "min_containment",
    "nearest",
    "top_k",
]
