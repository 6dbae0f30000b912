"""Verification of candidate pairs, the one path an ingest, a query and a check take.

A candidate pair is verified in steps: the signature agreement of the two (the estimate, which is
the similarity when texts are not stored), a prefilter that drops pairs whose agreement lies far
below the floor (``core.verify.prefilter_floor``), the stored texts of those left read and shingled,
and the exact Jaccard of each pair's shingle sets. Shingle sets are compared as shingled or sorted
by one rule, ``as_shingled``, whoever asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
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


# -- an ingest's candidates: pairs of content ids ------------------------------------------------


def verify_pairs(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    cand: Ids,
    plan: NewContents | None,
    sketch: Sketch | None,
) -> Verified:
    """The candidate pairs of content ids whose similarity (exact, or estimated without text)
    reaches the threshold. The plan's new contents are the batch's (in ``sketch``); the others are
    read from the store on ``scope``, the signatures of at most about ``STORED_AT_ONCE`` at a time
    (each pair's verdict is its own, so splitting the pairs changes none)."""
    chunks = _chunks_by_first(cand, STORED_AT_ONCE)
    if len(chunks) == 1:
        return _verify_pairs(scope, config, sketcher, cand, plan, sketch)
    found = [_verify_pairs(scope, config, sketcher, chunk, plan, sketch) for chunk in chunks]
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


def _verify_pairs(
    scope: Scope,
    config: IndexConfig,
    sketcher: Sketcher,
    cand: Ids,
    plan: NewContents | None,
    sketch: Sketch | None,
) -> Verified:
    threshold, num_perm = config.threshold, config.params.num_perm
    ids = distinct(cand)
    is_new = plan.is_new(ids) if plan is not None else np.zeros(ids.size, dtype=bool)
    old, new = ids[~is_new], ids[is_new]
    # Sketch rows of the batch's new contents.
    new_rows = plan.new_positions[plan.slots(new)] if plan is not None else np.empty(0, np.int64)
    # Local row r < len(old) is old[r]; the rest follow new's order.
    local = np.empty(ids.size, dtype=np.int64)
    local[np.flatnonzero(~is_new)] = np.arange(old.size)
    local[np.flatnonzero(is_new)] = old.size + np.arange(new.size)
    old_sigs = _stored_signatures(scope, old, num_perm)
    sigs = old_sigs if sketch is None else np.concatenate([old_sigs, sketch.signatures[new_rows]])
    left, right = local[np.searchsorted(ids, cand[:, 0])], local[np.searchsorted(ids, cand[:, 1])]
    agree = _agreement(sigs, left, right)
    if not config.store_text:
        ok = agree >= threshold
        return Verified(cand[ok, 0], cand[ok, 1], agree[ok])
    keep = hopeful(agree, threshold, num_perm)
    cand, left, right = cand[keep], left[keep], right[keep]
    # The rows in a pair, renumbered in order: the stored ones (below old.size) come first.
    used = distinct(np.concatenate([left, right]))
    needed = used[used < old.size]
    texts = _stored_texts(scope, old[needed])
    exact = _exact(
        sketcher,
        texts,
        sketch,
        new_rows[used[needed.size :] - old.size],
        np.searchsorted(used, left),
        np.searchsorted(used, right),
    )
    ok = exact >= threshold
    return Verified(cand[ok, 0], cand[ok, 1], exact[ok])


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


# -- a query's candidates: one text against the stored documents sharing a bucket ---------------


def verify_query(
    config: IndexConfig,
    sketcher: Sketcher,
    text: str,
    signature: npt.NDArray[np.uint32],
    stored_texts: Callable[[int], str],
    stored_signatures: npt.NDArray[np.uint32],
    floor: float,
) -> Similarities:
    """The similarity of ``text`` (its ``signature``) with each stored candidate (its signature a
    row of ``stored_signatures``, its text ``stored_texts(i)``): exact where texts are stored and
    the estimate is hopeful, else 0; the estimate where texts are not stored."""
    sim = agreement_with(signature, stored_signatures)
    if not config.store_text:
        return sim
    chosen = np.flatnonzero(hopeful(sim, floor, config.params.num_perm))
    sim = np.zeros(stored_signatures.shape[0])
    if chosen.size:
        # The query's text first, then each hopeful candidate's: one shingling call for all.
        texts = [text, *(stored_texts(i) for i in chosen.tolist())]
        pairs = np.arange(1, chosen.size + 1, dtype=np.int64)
        sim[chosen] = exact_similarity(
            sketcher, texts, None, np.empty(0, np.int64), np.zeros(chosen.size, np.int64), pairs
        )
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
    """The similarity of each (sketch row ``inputs[i]``, stored content ``content[i]``) pair,
    read in the caller's open transaction: exact where texts are stored and the estimate is
    hopeful, else 0; the estimate where texts are not stored. With ``helper`` (the collection on
    a second connection), many candidates' texts are read and shingled there meanwhile."""
    ids = distinct(content)
    read_ahead = helper is not None and config.store_text and not scope.distributed and ids.size >= READ_AHEAD
    with _shingles_ahead(scope, helper, sketcher, ids) if read_ahead and helper else nullcontext() as ahead:
        stored_ids, stored_sigs = contents.signatures(scope, ids.tolist(), config.params.num_perm)
        used = distinct(inputs)
        sigs = np.concatenate([sketch.signatures[used], stored_sigs])
        at = np.searchsorted(used, inputs)
        sim = signature_agreement(sigs, at, used.size + np.searchsorted(stored_ids, content))
        if not config.store_text:
            return sim
        chosen = np.flatnonzero(hopeful(sim, floor, config.params.num_perm))
        stored: Sequence[str] | Ragged
        if ahead is not None:
            needed, stored = ids, ahead.result()
        else:
            needed = distinct(content[chosen])
            texts = documents.texts(scope, needed.tolist())
            stored = [texts[i] for i in needed.tolist()]
        sim = np.zeros(content.size)
        if chosen.size:
            rows = distinct(inputs[chosen])
            right = np.searchsorted(needed, content[chosen])
            # Read ahead, every candidate's text is there, in a pair or not.
            in_pairs = rows.size + (distinct(right).size if ahead is not None else needed.size)
            left = len(stored) + np.searchsorted(rows, inputs[chosen])
            sim[chosen] = exact_similarity(sketcher, stored, sketch, rows, left, right, in_pairs)
        return sim


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
