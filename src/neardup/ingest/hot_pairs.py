"""A batch's candidate pairs, in parts: every pair sharing an LSH bucket, or, where the buckets are
so hot that those are far too many, only the ones the prefix filter cannot rule out.

The pairs the index stores are the candidates (pairs sharing a bucket) whose signatures agree
enough and whose exact Jaccard reaches the threshold (``verification.verify``). Where hot
buckets (of more than ``HOT_GROUP`` members) make most of the pairs, and those number more than a
few parts' worth, the batch reads the shingle sets of every
member (the stored ones from their texts) and makes the pairs sharing a prefix shingle
(``core.prefix_filter``): a superset of the pairs at or above the threshold. If those are fewer
by half, the candidates become the pairs that share a prefix shingle *and* a bucket, verified
once each from the sets in memory (``Parts.held``: no text is read again). A pair this drops
shares no prefix shingle, so it is below the threshold: the pairs stored are the same, with the
same similarities (tests/ingest/test_hot_buckets.py against brute force). Short records of one
template (nearly every pair a candidate, few a duplicate) are the case: their rare shingles fill
the prefixes. Clusters of near-copies are not (most of their pairs are duplicates): there the
buckets' pairs are fewer, and the batch enumerates them as before, having paid one read of the
members' texts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from neardup.core import candidates
from neardup.core.distinct import distinct
from neardup.core.prefix_filter import PrefixGroups, prefix_groups, prefix_parts
from neardup.core.ragged import Ragged, concat
from neardup.core.sketch import Sketch
from neardup.ingest.context import BatchContext
from neardup.ingest.plan import BatchPlan
from neardup.stages import stage
from neardup.storage import documents
from neardup.storage.scope import Scope

Pairs = npt.NDArray[np.int64]

# The prefix filter is tried where the hot buckets' pairs (repeats across bands counted) exceed
# this many parts (``candidates.PAIRS_PER_PART`` each): below, enumerating them is cheaper than
# reading every member's text.
JOIN_FROM_PARTS = 4
# Groups (one band's bucket) of more members than this are hot; the prefix filter is tried only
# where they make most of the pairs. Clusters of a hundred near-copies never are, so an ordinary
# ingest reads no texts for it.
HOT_GROUP = 1_024
# Shingles (4 bytes each) the prefix filter may hold for the members' sets; with more, the batch
# enumerates the buckets' pairs, so that its memory follows this bound and not the collection.
SETS_BUDGET = 1 << 25
# Stored texts read at a time while their shingle sets are made.
READ_CHUNK = 20_000


class Parts(NamedTuple):
    """A batch's candidate pairs in parts, and the shingle sets of the stored members read for
    them (ids sorted, sets row for row; None where none were read), which verify them."""

    pairs: Iterator[Pairs]
    held: tuple[Pairs, Ragged] | None


def candidate_parts(
    ctx: BatchContext, reading: Scope, plan: BatchPlan, sketch: Sketch, groups: Ragged
) -> Parts:
    """The batch's candidate pairs of content ids in parts (each pair in one part, the smaller id
    first), stored contents read on ``reading``: either every pair sharing a group of ``groups``
    (``candidates.candidate_parts``) or, where that is far more work, those sharing a group that
    the prefix filter leaves (see the module's docstring)."""
    if ctx.config.store_text:
        hot = _hot(groups)
        work = candidates.pair_count(groups, plan.first_new)
        hot_work = candidates.pair_count(hot, plan.first_new) if len(hot) else 0
        if hot_work > JOIN_FROM_PARTS * candidates.PAIRS_PER_PART and 2 * hot_work > work:
            joined = _joined(ctx, reading, plan, sketch, groups, work)
            if joined is not None:
                return joined
    return Parts(_enumerated(groups, plan.first_new), None)


def _hot(groups: Ragged) -> Ragged:
    """The groups of more than ``HOT_GROUP`` members."""
    lengths = groups.lengths()
    hot = lengths > HOT_GROUP
    values = np.asarray(groups.values)[np.repeat(hot, lengths)]
    return Ragged(values, np.r_[0, np.cumsum(lengths[hot])].astype(np.int64))


def _enumerated(groups: Ragged, first_new: int) -> Iterator[Pairs]:
    for cand in candidates.candidate_parts(groups, first_new=first_new):
        cand[:, 0] = np.abs(cand[:, 0])  # contents stored by later writers, negated in the groups
        yield cand


def _joined(
    ctx: BatchContext, reading: Scope, plan: BatchPlan, sketch: Sketch, groups: Ragged, work: int
) -> Parts | None:
    """The prefix filter's parts, or None where the sets exceed ``SETS_BUDGET`` or the filter
    would leave more than half the buckets' pairs."""
    held = _member_sets(ctx, reading, plan, sketch, distinct(np.asarray(groups.values, np.int64)))
    if held is None:
        return None
    ids, sets = held
    shared = _prefix_groups(ids, sets, ctx.config.threshold)
    if 2 * candidates.pair_count(shared.groups, plan.first_new) > work:
        return None
    stored = ~plan.is_new(np.abs(ids))
    order = np.argsort(np.abs(ids[stored]), kind="stable")
    held_sets = (np.abs(ids[stored])[order], sets.take(np.flatnonzero(stored)[order]))
    parts = _filtered(shared, candidates.Membership(groups), plan.first_new, ctx.config.threshold)
    return Parts(parts, held_sets)


def _filtered(
    shared: PrefixGroups, membership: candidates.Membership, first_new: int, threshold: float
) -> Iterator[Pairs]:
    for cand in prefix_parts(shared, threshold, first_new):
        kept = _kept(cand, membership)
        if kept.shape[0]:
            kept[:, 0] = np.abs(kept[:, 0])
            yield kept


@stage("candidate pairs: prefix filter, a shared bucket")
def _kept(cand: Pairs, membership: candidates.Membership) -> Pairs:
    """The pairs of ``cand`` (left by the prefix and positional filters) that share a bucket too."""
    return cand[membership.share(cand[:, 0], cand[:, 1])]


_prefix_groups = stage("candidate pairs: prefix groups")(prefix_groups)


@stage("candidate pairs: members' shingle sets")
def _member_sets(
    ctx: BatchContext, reading: Scope, plan: BatchPlan, sketch: Sketch, members: Pairs
) -> tuple[Pairs, Ragged] | None:
    """The members (as in the groups: ids of contents stored by later writers negated) in some
    order, with their sorted distinct shingle sets: the batch's new contents from ``sketch``, the
    stored ones from their texts; None once the sets exceed ``SETS_BUDGET`` shingles."""
    content = np.abs(members)
    is_new = plan.is_new(content)
    new = members[is_new]
    parts = [sketch.distinct_shingles(plan.new_positions[plan.slots(np.abs(new))])]
    held = int(parts[0].values.size)
    old = members[~is_new]
    for start in range(0, old.size, READ_CHUNK):
        if held > SETS_BUDGET:
            return None
        wanted = np.abs(old[start : start + READ_CHUNK]).tolist()
        texts = documents.texts(reading, wanted)
        parts.append(ctx.sketcher.shingles([texts[i] for i in wanted], unique=True))
        held += int(parts[-1].values.size)
    if held > SETS_BUDGET:
        return None
    return np.concatenate([new, old]), concat(*parts)
