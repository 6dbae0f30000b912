"""Verification of candidate pairs: one function, ``verify``, that an ingest, a rebuild, a query,
a check, a neighbours query and a cluster's pairs on demand all call.

A pair is two ids: stored contents (read on a ``Reader``: the collection, or rows a caller read
already) or the rows of a sketch in memory (an ingest's new contents, a query's or a check's texts).
It is verified in steps: the signature agreement of the two (the estimate, which is the similarity
when texts are not stored), a prefilter that drops pairs whose agreement lies far below the floor
(``core.verify.prefilter_floor``), the shingle sets of those left (stored texts read and shingled,
or sets held already), and the exact Jaccard of each pair's sets. Shingle sets are compared as
shingled or sorted by one rule, ``as_shingled``, whoever asks. The callers below are thin: which
ids, which floor, and what they keep of the similarities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from neardup.config import IndexConfig
from neardup.core.candidates import bucket_groups, candidate_parts
from neardup.core.distinct import distinct
from neardup.core.lsh import bucket_rows
from neardup.core.minhash import empty_rows
from neardup.core.ragged import Ragged, concat
from neardup.core.shingle import distinct_rows
from neardup.core.sketch import Sketch, Sketcher
from neardup.core.verify import (
    agreement_with,
    exact_jaccard,
    exact_jaccard_unsorted,
    exact_overlaps,
    prefilter_floor,
    signature_agreement,
)
from neardup.errors import SchemaError
from neardup.stages import stage
from neardup.storage import contents, documents
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, export_snapshot, read_snapshot

# Up to this many pairs per text in them, shingles are compared as shingled (a hash table a pair)
# instead of sorting each text's set once and merging each pair's. Past it, texts sit in large
# clusters and sorting once pays (docs/benchmarks/verify.md).
UNSORTED_PAIRS_PER_TEXT = 4
# Stored contents whose signatures (512 bytes each under 128 permutations) one verification reads at
# a time, about: a part's pairs are cut by their first ids to keep to it (their second ids are the
# batch's own, in memory, in an ingest).
STORED_AT_ONCE = 1 << 16
# From this many candidate contents on, a check's stored texts are read and shingled on the second
# connection (in the check's snapshot) while this one reads their signatures: all of them, since
# which are hopeful is not known yet.
READ_AHEAD = 1_000

Ids = npt.NDArray[np.int64]
Similarities = npt.NDArray[np.float64]


class NewContents(Protocol):
    """Which contents of a batch are new, and their rows in its sketch (``ingest.plan.BatchPlan``)."""

    @property
    def new_positions(self) -> Ids: ...

    def slots(self, content_ids: Ids) -> Ids: ...

    def is_new(self, content_ids: Ids) -> npt.NDArray[np.bool_]: ...


class Verified(NamedTuple):
    """Verified pairs of content ids and their similarities."""

    left: Ids
    right: Ids
    similarity: Similarities


def link_floor(config: IndexConfig) -> float:
    """The signature agreement below which a pair fails without an exact check (``hopeful``), as
    linking (``core.linking``) applies it to one pair at a time."""
    return prefilter_floor(config.threshold, config.params.num_perm) if config.store_text else 0.0


def signatures_and_sets(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    ids: Ids,
    plan: NewContents | None,
    sketch: Sketch | None,
) -> tuple[npt.NDArray[np.uint32], Ragged | None]:
    """The signatures and sorted distinct shingle sets (None where texts are not stored) of contents
    ``ids`` (sorted, distinct), in their order: the batch's new ones from ``sketch``, the stored
    ones read on ``scope``."""
    is_new = plan.is_new(ids) if plan is not None else np.zeros(ids.size, dtype=bool)
    old, new = ids[~is_new], ids[is_new]
    rows = plan.new_positions[plan.slots(new)] if plan is not None else np.zeros(0, np.int64)
    sigs = np.empty((ids.size, config.params.num_perm), dtype=np.uint32)
    if old.size:
        sigs[~is_new] = _stored_signatures(scope, old, config.params.num_perm)
    if new.size and sketch is not None:
        sigs[is_new] = sketch.signatures[rows]
    if not config.store_text:
        return sigs, None
    parts, order = [], []
    if old.size:
        parts.append(sketcher.shingles(_stored_texts(scope, old), unique=True))
        order.append(np.flatnonzero(~is_new))
    if new.size and sketch is not None:
        parts.append(sketch.distinct_shingles(rows))
        order.append(np.flatnonzero(is_new))
    if not parts:
        return sigs, Ragged(np.zeros(0, np.uint32), np.zeros(1, np.int64))
    sets = concat(*parts)
    at = np.concatenate(order)
    return sigs, sets if np.array_equal(at, np.arange(ids.size)) else sets.take(np.argsort(at, kind="stable"))


def as_shingled(pairs: int, texts: int) -> bool:
    """Whether ``pairs`` pairs among ``texts`` texts are compared as shingled (each text in few
    pairs) rather than as sorted sets (sorting a text's set once pays where it is in many)."""
    return pairs <= UNSORTED_PAIRS_PER_TEXT * texts


def hopeful(agreement: Similarities, floor: float, num_perm: int) -> npt.NDArray[np.bool_]:
    """The pairs whose signature agreement is worth an exact check for similarity ``floor``."""
    return agreement >= (prefilter_floor(floor, num_perm) if floor > 0 else 0.0)


def exact_similarity(
    sketcher: Sketcher,
    texts: Sequence[str] | Ragged,
    sketch: Sketch | None,
    sketch_rows: Ids,
    left: Ids,
    right: Ids,
    in_pairs: int | None = None,
) -> Similarities:
    """Exact Jaccard of rows ``left[i]`` and ``right[i]``: rows below ``len(texts)`` are those
    texts (or their shingles as shingled), row ``len(texts) + j`` is row ``sketch_rows[j]`` of
    ``sketch`` (shingled already). ``in_pairs``: how many rows are in some pair (all, if None)."""
    m = len(texts)
    if as_shingled(left.size, m + sketch_rows.size if in_pairs is None else in_pairs):
        own = texts if isinstance(texts, Ragged) else sketcher.shingles(texts, unique=False)
        if sketch is None:
            return exact_jaccard_unsorted(own, own, left, right)
        rows = np.r_[np.arange(m), m + sketch_rows].astype(np.int64)
        parts = [own, *sketch.shingles]
        return exact_jaccard_unsorted(parts, parts, rows[left], rows[right])
    if isinstance(texts, Ragged):
        sets = distinct_rows(texts, np.arange(m, dtype=np.int64))
    else:
        sets = sketcher.shingles(texts, unique=True)
    if sketch is not None:
        sets = concat(sets, sketch.distinct_shingles(sketch_rows))
    return exact_jaccard(sets, left, right)


# -- the one verification ------------------------------------------------------------------------


class Reader(Protocol):
    """Where ``verify`` reads stored contents, asked for ids sorted and distinct, in their order."""

    def signatures(self, ids: Ids) -> npt.NDArray[np.uint32]: ...

    def texts(self, ids: Ids) -> Sequence[str] | Ragged:
        """Their texts, or their shingles held already (as shingled, or as sorted sets)."""
        ...


@dataclass(frozen=True)
class Store:
    """Stored contents read from the collection on ``scope``."""

    scope: Scope
    num_perm: int

    def signatures(self, ids: Ids) -> npt.NDArray[np.uint32]:
        return _stored_signatures(self.scope, ids, self.num_perm)

    def texts(self, ids: Ids) -> list[str]:
        return _stored_texts(self.scope, ids)


@dataclass(frozen=True)
class Held:
    """Stored contents whose shingle sets a caller holds already (``ids`` sorted, ``sets`` row
    for row), their signatures read on ``store``: their texts are not read again."""

    store: Reader
    ids: Ids
    sets: Ragged

    def signatures(self, ids: Ids) -> npt.NDArray[np.uint32]:
        return self.store.signatures(ids)

    def texts(self, ids: Ids) -> Ragged:
        return self.sets.take(np.searchsorted(self.ids, ids))


@dataclass(frozen=True)
class Given:
    """Stored contents a caller read already: ``ids`` (sorted), their signatures and texts."""

    ids: Ids
    sigs: npt.NDArray[np.uint32]
    stored_texts: Sequence[str]

    def signatures(self, ids: Ids) -> npt.NDArray[np.uint32]:
        return self.sigs[np.searchsorted(self.ids, ids)]

    def texts(self, ids: Ids) -> list[str]:
        return [self.stored_texts[i] for i in np.searchsorted(self.ids, ids).tolist()]


class SketchRows:
    """The rows of a sketch of texts that are not stored (a query's, a check's) as ids, for
    ``InMemory``: row r is id ``-1 - r``, below every content id."""

    def __init__(self, rows: int) -> None:
        self.new_positions = np.arange(rows, dtype=np.int64)

    def slots(self, content_ids: Ids) -> Ids:
        return -1 - content_ids

    def is_new(self, content_ids: Ids) -> npt.NDArray[np.bool_]:
        return content_ids < 0

    @staticmethod
    def ids(rows: Ids) -> Ids:
        """The ids of sketch rows ``rows``."""
        return -1 - np.asarray(rows, dtype=np.int64)


class InMemory(NamedTuple):
    """The pairs' ids that are rows of ``sketch`` (``rows.is_new``), and which rows."""

    rows: NewContents
    sketch: Sketch


def verify(
    config: IndexConfig,
    sketcher: Sketcher,
    reader: Reader,
    left: Ids,
    right: Ids,
    fresh: InMemory | None,
    floor: float,
) -> Similarities:
    """The similarity of each pair (``left[i]``, ``right[i]``) of ids: the ids ``fresh`` names
    are rows of its sketch, the others stored contents read on ``reader``. Where texts are stored,
    the exact Jaccard of the pairs whose signature agreement is hopeful for ``floor``, 0 for the
    others; where they are not, the agreement. Each pair is judged once, on its own: splitting
    the pairs changes no verdict."""
    num_perm = config.params.num_perm
    ids = distinct(np.concatenate([left, right]))
    is_new = fresh.rows.is_new(ids) if fresh is not None else np.zeros(ids.size, dtype=bool)
    old, new = ids[~is_new], ids[is_new]
    # Sketch rows of the in-memory ids.
    new_rows = fresh.rows.new_positions[fresh.rows.slots(new)] if fresh is not None else np.empty(0, np.int64)
    # Local row r < len(old) is old[r]; the rest follow new's order.
    local = np.empty(ids.size, dtype=np.int64)
    local[np.flatnonzero(~is_new)] = np.arange(old.size)
    local[np.flatnonzero(is_new)] = old.size + np.arange(new.size)
    old_sigs = reader.signatures(old) if old.size else np.empty((0, num_perm), np.uint32)
    sigs = old_sigs if fresh is None else np.concatenate([old_sigs, fresh.sketch.signatures[new_rows]])
    at_left, at_right = local[np.searchsorted(ids, left)], local[np.searchsorted(ids, right)]
    agree = _agreement(sigs, at_left, at_right)
    if not config.store_text:
        return agree
    chosen = np.flatnonzero(hopeful(agree, floor, num_perm))
    sim = np.zeros(agree.size)
    if chosen.size == 0:
        return sim
    at_left, at_right = at_left[chosen], at_right[chosen]
    # The rows in a pair, renumbered in order: the stored ones (below old.size) come first.
    used = distinct(np.concatenate([at_left, at_right]))
    needed = used[used < old.size]
    texts: Sequence[str] | Ragged = reader.texts(old[needed]) if needed.size else []
    sim[chosen] = _exact(
        sketcher,
        texts,
        None if fresh is None else fresh.sketch,
        new_rows[used[needed.size :] - old.size],
        np.searchsorted(used, at_left),
        np.searchsorted(used, at_right),
    )
    return sim


# -- an ingest's, a rebuild's and a cluster's candidates: pairs of content ids -------------------


def verify_pairs(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    cand: Ids,
    plan: NewContents | None,
    sketch: Sketch | None,
    held: tuple[Ids, Ragged] | None = None,
) -> Verified:
    """The candidate pairs of content ids whose similarity (exact, or estimated without text)
    reaches the threshold (``verify``). The plan's new contents are the batch's (in ``sketch``);
    the others are read from the store on ``scope`` (their sets from ``held`` where it holds
    them: ids sorted, sets row for row), the signatures of at most about ``STORED_AT_ONCE`` at a
    time."""
    reader: Reader = Store(scope, config.params.num_perm)
    if held is not None:
        reader = Held(reader, *held)
    fresh = InMemory(plan, sketch) if plan is not None and sketch is not None else None
    found = []
    for chunk in _chunks_by_first(cand, STORED_AT_ONCE):
        sim = verify(config, sketcher, reader, chunk[:, 0], chunk[:, 1], fresh, config.threshold)
        ok = sim >= config.threshold
        found.append(Verified(chunk[ok, 0], chunk[ok, 1], sim[ok]))
    if len(found) == 1:
        return found[0]
    return Verified(*(np.concatenate([f[i] for f in found]) for i in range(3)))


def _chunks_by_first(cand: Ids, most: int) -> list[Ids]:
    """``cand`` cut into chunks of pairs whose first ids number at most ``most`` distinct each (one
    chunk where they do already): a part of pairs of a large collection names up to every stored
    content, and their signatures, read at once, would follow the collection, not the part."""
    first = cand[:, 0]
    if cand.shape[0] <= most or distinct(first).size <= most:
        return [cand]
    cand = cand[np.argsort(first, kind="stable")]
    first = cand[:, 0]
    starts = np.flatnonzero(np.r_[True, first[1:] != first[:-1]])
    cuts = starts[most::most]
    return np.split(cand, cuts)


@stage("verify: read stored signatures")
def _stored_signatures(scope: Scope, ids: Ids, num_perm: int) -> npt.NDArray[np.uint32]:
    """The stored signatures of contents ``ids`` (sorted, distinct), in their order."""
    found, sigs = contents.signatures(scope, ids.tolist(), num_perm)
    if found.size != ids.size:
        raise SchemaError(f"{ids.size - found.size} stored contents have no signature")
    return sigs


@stage("verify: signature agreement")
def _agreement(sigs: npt.NDArray[np.uint32], left: Ids, right: Ids) -> Similarities:
    return signature_agreement(sigs, left, right)


@stage("verify: read stored texts")
def _stored_texts(scope: Scope, ids: Ids) -> list[str]:
    """The stored texts of contents ``ids``, in their order."""
    wanted = ids.tolist()
    texts = documents.texts(scope, wanted)
    return [texts[i] for i in wanted]


_exact = stage("verify: shingle sets and exact Jaccard")(exact_similarity)


# -- a cluster's complete pairs, on demand ------------------------------------------------------


def complete_pairs(
    scope: Scope, config: IndexConfig, sketcher: Sketcher, content_ids: Ids
) -> Iterator[Verified]:
    """Every candidate pair (sharing a bucket) among the stored contents ``content_ids`` whose
    similarity reaches the threshold, verified now, in parts (``candidates.candidate_parts``): what
    the pairs table would hold for them if every pair were stored. Quadratic in the contents of a
    cluster of near-copies, in time (never in memory)."""
    ids, sigs = contents.signatures(scope, content_ids.tolist(), config.params.num_perm)
    bearing = ~empty_rows(sigs) if len(ids) else np.zeros(0, dtype=bool)
    ids, sigs = np.asarray(ids, dtype=np.int64)[bearing], sigs[bearing]
    groups = bucket_groups(*bucket_rows(ids, sketcher.band_keys(sigs)))
    for cand in candidate_parts(groups):
        yield verify_pairs(scope, config, sketcher, cand, None, None)


# -- a query's candidates: one text against the stored contents sharing a bucket ----------------


def verify_query(
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    signature: npt.NDArray[np.uint32],
    stored_signatures: npt.NDArray[np.uint32],
    stored_texts: Sequence[str],
    floor: float,
) -> Similarities:
    """The similarity of ``text`` (its ``signature``) with each stored candidate (a row of
    ``stored_signatures``, its text in ``stored_texts``), in that order: ``verify``'s rules
    (signature agreement, ``hopeful``, the exact Jaccard of the hopeful) for one text against a
    handful of candidates, without the id bookkeeping that pairs of a batch need, which would cost
    a query more than its verification (tests/test_verification.py holds the two equal)."""
    sim = agreement_with(signature, stored_signatures)
    if not config.store_text:
        return sim
    chosen = np.flatnonzero(hopeful(sim, floor, config.params.num_perm))
    sim = np.zeros(stored_signatures.shape[0])
    if chosen.size:
        # The query's text first, then each hopeful candidate's: one shingling call for all.
        texts = [text, *(stored_texts[i] for i in chosen.tolist())]
        pairs = np.arange(1, chosen.size + 1, dtype=np.int64)
        none = np.empty(0, np.int64)
        sim[chosen] = exact_similarity(sketcher, texts, None, none, np.zeros(chosen.size, np.int64), pairs)
    return sim


# -- a neighbours query's candidates: one text's shingle set against stored texts ----------------


class Overlaps(NamedTuple):
    """Exact overlaps of a text's shingle set with each of some stored texts'."""

    shared: Ids
    """Shingles in both, one per stored text."""
    size: int
    """The text's distinct shingles."""
    sizes: Ids
    """Each stored text's distinct shingles."""

    def jaccard(self) -> Similarities:
        """Exact Jaccard of the text with each stored text (0 where both are empty)."""
        union = self.size + self.sizes - self.shared
        return np.divide(self.shared, union, out=np.zeros(self.shared.size), where=union > 0)  # type: ignore[no-any-return]

    def contained(self) -> Similarities:
        """The share of the text's shingles each stored text contains."""
        return self.shared / self.size if self.size else np.zeros(self.shared.size)

    def within(self) -> Similarities:
        """The share of each stored text's shingles the text contains."""
        return np.divide(self.shared, self.sizes, out=np.zeros(self.shared.size), where=self.sizes > 0)


def verify_overlaps(sketcher: Sketcher, text: str, stored: Sequence[str]) -> Overlaps:
    """The exact overlap of ``text``'s shingle set with each of ``stored``'s: one shingling call
    for all, then the intersections (every answer of a top-k or containment query is this)."""
    sets = sketcher.shingles([text, *stored], unique=True)
    lengths = sets.lengths()
    rest = Ragged(sets.values[sets.offsets[1] :], sets.offsets[1:] - sets.offsets[1])
    return Overlaps(exact_overlaps(sets[0], rest), int(lengths[0]), lengths[1:])


# -- a check's candidates: a sketched batch against the stored contents sharing a bucket --------


def verify_matches(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    sketch: Sketch,
    inputs: Ids,
    content: Ids,
    floor: float,
    helper: Callable[[], Scope] | None = None,
) -> Similarities:
    """The similarity (``verify``) of each (sketch row ``inputs[i]``, stored content
    ``content[i]``) pair, read in the caller's open transaction. With ``helper`` (the collection
    on a second connection), many candidates' texts are read and shingled there meanwhile."""
    ids = distinct(content)
    store = Store(scope, config.params.num_perm)
    read_ahead = helper is not None and config.store_text and not scope.distributed and ids.size >= READ_AHEAD
    with _shingles_ahead(scope, helper, sketcher, ids) if read_ahead and helper else nullcontext() as ahead:
        reader: Reader = store if ahead is None else _Ahead(store, ids, ahead)
        fresh = InMemory(SketchRows(sketch.signatures.shape[0]), sketch)
        return verify(config, sketcher, reader, SketchRows.ids(inputs), content, fresh, floor)


@dataclass(frozen=True)
class _Ahead:
    """Stored contents whose texts a second connection reads and shingles meanwhile (all of
    ``ids``, sorted, since which are hopeful is not known yet)."""

    store: Store
    ids: Ids
    shingled: Future[Ragged]

    def signatures(self, ids: Ids) -> npt.NDArray[np.uint32]:
        return self.store.signatures(ids)

    def texts(self, ids: Ids) -> Ragged:
        return self.shingled.result().take(np.searchsorted(self.ids, ids))


@contextmanager
def _shingles_ahead(
    scope: Scope, helper: Callable[[], Scope], sketcher: Sketcher, content_ids: Ids
) -> Iterator[Future[Ragged]]:
    """The shingles (as shingled) of the stored text of each content, in ``content_ids``' order,
    read on ``helper()``'s connection in the snapshot of the caller's open transaction; the block
    ends only when that read has, so the second connection is free again whatever happened."""
    snapshot = export_snapshot(scope.conn)
    second = helper()

    def shingled() -> Ragged:
        with transaction(second.conn):
            read_snapshot(second.conn, snapshot=snapshot)
            texts = documents.texts(second, content_ids.tolist())
        return sketcher.shingles([texts[i] for i in content_ids.tolist()], unique=False)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="neardup-texts") as pool:
        yield pool.submit(shingled)
