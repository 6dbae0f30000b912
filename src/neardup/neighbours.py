"""A text's nearest stored documents (top-k by Jaccard) and the stored documents that contain it or
that it contains, for a collection that keeps its neighbours (``neighbours=True``).

Candidates are the stored contents with a fingerprint (``core.fingerprints``) among the text's
probes (its own fingerprints and its grams low enough to be one), counted in one statement with
each candidate's shingle count; fingerprints held by many contents are read only where they could
matter (``_sharing``). A top-k query keeps only the candidates that share enough fingerprints to
hold the floor's share of the text (an answer does: Jaccard is at most containment), ranks them
by the Jaccard their shared fingerprints and sizes suggest, reads the signatures of the best
``SIGNED_MAX`` and verifies those whose signature agreement could make the top k
(``worth_verifying``). A containment query verifies the candidates whose shared fingerprints could
make the share asked, and the long ones (``LARGE``). Every answer is verified exactly on the
shingle sets (``verification.verify_overlaps``), so precision is 1 and recall is what the
candidates hold: certain for a shared run of text of about ``WINDOW + 2k`` characters, likely for
a stored text with a fingerprint inside any shared run.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np
import numpy.typing as npt

from neardup import validate
from neardup.config import IndexConfig
from neardup.core.fingerprints import WINDOW, fingerprints, probes
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketcher
from neardup.core.verify import agreement_with
from neardup.errors import Hint, ParamsError
from neardup.storage import documents
from neardup.storage import fingerprints as stored_fingerprints
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, read_snapshot
from neardup.verification import Overlaps, verify_overlaps

Direction = Literal["contains", "within"]
DIRECTIONS: tuple[str, ...] = get_args(Direction)

# A top-k candidate is verified while its signature agreement is within this many standard errors
# of what could make the top k; at most VERIFY_MAX of them, the best estimates first.
Z_BOUND = 3.0
VERIFY_MAX = 1_000
# A query counts the fingerprints held by at most the first of TIERS contents, then the next tier,
# while those past it are enough of the text's own for a family's shared boilerplate to make an
# answer (see _sharing): holders are read a row each, so common ones cost the most.
TIERS = (100, 1_000, 20_000)
# A within query reads the stored texts short enough to lie within through common fingerprints
# alone, with their fingerprints, while there are at most this many; past it, reading the last tier
# whole costs less.
SHORT_MOST = 500
# A top-k query reads the signatures of the SIGNED_MAX candidates whose shared fingerprints
# promise the most.
SIGNED_MAX = 2_000
# A containment candidate this many times the text's length is verified whatever it shares.
LARGE = 16


class Contained(NamedTuple):
    """A stored document that contains the text or is contained in it, with the exact share
    (``containment``) and the exact Jaccard."""

    id: str
    containment: float
    jaccard: float


def top_k(value: object) -> int:
    """``value`` as a count of answers (a positive integer), else ParamsError."""
    return validate.positive_int(value, "top_k")


def min_containment(value: object) -> float:
    """``value`` as a containment threshold in (0, 1], else ParamsError."""
    return validate.fraction(value, "min_containment", zero=False)


def direction(value: object) -> Direction:
    """``value`` as a containment direction, else ParamsError."""
    if value not in DIRECTIONS:
        raise ParamsError(f"direction must be one of {', '.join(DIRECTIONS)}, got {value!r}")
    return value  # type: ignore[return-value]


def require_neighbours(config: IndexConfig, name: str) -> None:
    """ParamsError, saying how to enable them, unless the collection keeps its neighbours."""
    if not config.params.neighbours:
        raise ParamsError(
            f"collection {name!r} keeps no neighbours, so it answers neither top-k nor containment",
            hint=Hint("rebuild it with them:", remedy="rebuild_neighbours"),
        )


def nearest(
    scope: Scope, config: IndexConfig, sketcher: Sketcher, text: str, k: int
) -> list[tuple[str, float]]:
    """The ``k`` stored documents most similar to ``text`` with Jaccard at least the collection's
    ``neighbour_floor``, best first: (id, exact Jaccard). Approximate only in what it finds."""
    k = top_k(k)
    text = validate.text(text)
    sketch = sketcher.sketch([text], hashed=False)
    floor = config.params.neighbour_floor
    with transaction(scope.conn):
        read_snapshot(scope.conn)
        shingles = sketch.shingles[0]
        # An answer holds at least ``floor`` of the text's shingles (J <= its containment), so a
        # candidate that shares too few fingerprints for that is left in the database.
        ids, shared, sizes = _sharing(scope, shingles, config.params.k, floor, least=floor)
        if ids.size:
            # Rank by estimated Jaccard, not by shared fingerprints: a long stored text shares
            # many fingerprints with a short query yet is far from it. First by what the shared
            # fingerprints say of the overlap, then the best by their signatures.
            rough = fingerprint_jaccard(shared, sizes, int(shingles.values.size))
            ids = ids[np.argsort(-rough, kind="stable")[:SIGNED_MAX]]
            ids, sigs = stored_fingerprints.signatures(scope, ids, config.params.num_perm)
            ids = ids[
                worth_verifying(agreement_with(sketch.signatures[0], sigs), k, floor, config.params.num_perm)
            ]
        overlaps, names = _verified(scope, sketcher, text, ids)
    jaccard = overlaps.jaccard().tolist()
    found = [(n, j) for i, j in zip(ids.tolist(), jaccard, strict=True) if j >= floor for n in names[i]]
    found.sort(key=lambda r: (-r[1], r[0]))
    return found[:k]


def fingerprint_jaccard(
    shared: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64], size: int
) -> npt.NDArray[np.float64]:
    """Rough Jaccard of a text of ``size`` shingles with stored texts of ``sizes`` that share
    ``shared`` fingerprints with its probes: each shared fingerprint stands for the
    ``(WINDOW + 1) / 2`` grams a fingerprint samples on average (approximate, for ranking)."""
    overlap = np.minimum(shared * ((WINDOW + 1) / 2), np.minimum(sizes, size))
    union = np.maximum(size + sizes - overlap, 1.0)
    return overlap / union  # type: ignore[no-any-return]


def worth_verifying(
    estimates: npt.NDArray[np.float64], k: int, floor: float, num_perm: int
) -> npt.NDArray[np.int64]:
    """Positions of the candidates whose Jaccard could reach the top ``k`` (by their signature
    agreement ``estimates``), best estimate first, at most ``VERIFY_MAX``: those whose upper bound
    reaches both ``floor`` and the ``k``-th largest lower bound, which the true ``k``-th Jaccard is
    at least (each bound ``Z_BOUND`` standard errors out, so approximate)."""
    e = np.asarray(estimates, dtype=np.float64)
    # The binomial error of an agreement share, with one row's worth of slack at 0 and 1.
    spread = Z_BOUND * np.sqrt((e * (1.0 - e) + 1.0 / num_perm) / num_perm)
    high = e + spread
    low = e - spread
    kth = float(np.partition(low, low.size - k)[low.size - k]) if low.size >= k else 0.0
    keep = np.flatnonzero(high >= max(floor, kth))
    order = keep[np.argsort(-e[keep], kind="stable")]
    return order[:VERIFY_MAX]


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
    shingles = sketcher.shingles([validate.text(text)], unique=False)
    with transaction(scope.conn):
        read_snapshot(scope.conn)
        if way == "contains":
            # A stored text many times longer can hold most of the text's shingles scattered, with
            # no shared run for fingerprints to show: each such candidate is kept whatever it
            # shares. The statement keeps only the candidates whose shared fingerprints could make
            # the share asked, and the long ones; the common share of a short text's few
            # fingerprints is a rough measure of its containment, hence the slack.
            large = LARGE * int(shingles.values.size)
            ids, _, _ = _sharing(
                scope, shingles, config.params.k, threshold, Z_BOUND, least=threshold, large=large
            )
        else:
            ids = _within(scope, shingles, config.params.k, threshold)
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


def _sharing(
    scope: Scope,
    shingles: Ragged,
    step: int,
    bound: float,
    slack: float = 0.0,
    least: float = 0.0,
    large: int | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(content, fingerprints shared, shingle count) of the stored contents sharing a fingerprint with
    the probes of a text (``shingles``, one row). It counts the fingerprints held by at most each of
    ``TIERS`` contents in turn (the first two in one statement), and reads the next tier only while
    those past this one make at least ``bound`` of the text's own (their count taken as Poisson,
    ``slack`` standard deviations and one fingerprint up: a short text has few). A stored text that
    shares only those (a family's boilerplate) shares at most that share of them, about its containment
    of the text, which bounds its Jaccard too (approximate). With ``least``, only the contents whose
    count could reach that share of the text's own fingerprints that are counted (``Z_BOUND`` Poisson
    deviations up), and those of at least ``large`` shingles, come back (approximate)."""
    own, keys = _own_and_probes(shingles, step)
    if keys.size == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, empty

    def counted(cap: int, first: tuple[int, float, float] | None = None) -> stored_fingerprints.Sharing:
        return stored_fingerprints.sharing(scope, keys, cap, own, least, Z_BOUND, large, None, first)

    # The first two tiers are one statement, which counts under the first where it may.
    found = counted(TIERS[1], (TIERS[0], bound, slack))
    # Past the second tier only while the text's fingerprints too common to count there could
    # still make the share asked.
    held = int(np.count_nonzero(np.isin(own, found.common)))
    if found.cap == TIERS[1] and held + slack * np.sqrt(held) + 1.0 >= bound * own.size:
        found = counted(TIERS[2])
    return found.ids, found.shared, found.sizes


def _own_and_probes(shingles: Ragged, step: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """A text's own fingerprints and the keys its query looks up (``shingles``, one row)."""
    return fingerprints(shingles, step)[1], probes(shingles, step)


def _within(scope: Scope, shingles: Ragged, step: int, share: float) -> npt.NDArray[np.int64]:
    """The stored contents that could hold ``share`` of their own shingles inside a text
    (``shingles``, one row): those whose fingerprints shared with its probes could make that share
    of their expected ones (approximate as the Poisson model of ``_sharing``). Every tier counts: a
    short stored text can be all boilerplate. The fingerprints held by more than the second tier's
    cap are not read by their holders: a stored text that shares only those shares at most the
    text's own ones among them, so it is short, and the short stored texts are read instead, with
    their fingerprints; only where too many are that short is the last tier read whole."""
    own, keys = _own_and_probes(shingles, step)
    if keys.size == 0:
        return np.empty(0, np.int64)
    density = 2.0 / (WINDOW + 1)

    def counted(cap: int) -> stored_fingerprints.Sharing:
        return stored_fingerprints.sharing(scope, keys, cap, own, share, Z_BOUND, None, density)

    found = counted(TIERS[1])
    if found.common.size == 0:
        return found.ids
    # A stored text that shares none of the counted fingerprints shares at most the text's own
    # common ones inside the runs they have in common (``held``), so it is short: by the filter's
    # model, ``Z_BOUND`` deviations and one up; where too many stored texts are that short, by
    # the statement's own filter for a count of 0 (held and one up), which misses a few more.
    held = int(np.count_nonzero(np.isin(own, found.common)))
    for slack in (Z_BOUND, 0.0):
        longest = (held + slack * np.sqrt(held) + 1.0) / (share * density)
        short = stored_fingerprints.short_holders(scope, found.common, longest, SHORT_MOST)
        if short is not None:
            ids, shared, sizes = short
            fits = shared + Z_BOUND * np.sqrt(shared) + 1.0 >= share * density * sizes
            return np.union1d(found.ids, ids[fits])
    return counted(TIERS[-1]).ids


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
