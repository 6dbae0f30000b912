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
# Shingles (4 bytes each) the prefix filter may hold for the new members' sets and one chunk of
# the stored members'; with more, the batch enumerates the buckets' pairs.
SETS_BUDGET = 1 << 25
# Stored members whose texts are read, shingled and joined with the batch at a time: the join
# holds one such chunk, whatever the number of stored members sharing the batch's buckets.
READ_CHUNK = 20_000


Held = tuple[Pairs, Ragged]
"""Shingle sets of stored contents read for a part (ids sorted, sets row for row): its verifier
compares those, and reads no text again."""
Part = tuple[Pairs, Held | None]
"""A part of candidate pairs, and the stored sets read for it (None where none were)."""


def candidate_parts(
    ctx: BatchContext, reading: Scope, plan: BatchPlan, sketch: Sketch, groups: Ragged
) -> Iterator[Part]:
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
    return ((cand, None) for cand in _enumerated(groups, plan.first_new))


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
) -> Iterator[Part] | None:
    """The prefix filter's parts, or None where the sets exceed ``SETS_BUDGET`` or the filter
    would leave more than half the buckets' pairs (judged on the first chunk of stored members).
    The stored members are read ``READ_CHUNK`` at a time, each chunk joined with the batch's new
    contents and let go before the next is read: what the join holds follows the batch and the
    chunk, not how many stored contents share the batch's buckets."""
    members = distinct(np.asarray(groups.values, np.int64))
    is_new = plan.is_new(np.abs(members))
    new, old = members[is_new], members[~is_new]
    new_sets = sketch.distinct_shingles(plan.new_positions[plan.slots(np.abs(new))])
    first = _chunk_sets(ctx, reading, old[:READ_CHUNK])
    if int(new_sets.values.size) + int(first.values.size) > SETS_BUDGET:
        return None
    shared = _prefix_groups(
        np.concatenate([new, old[:READ_CHUNK]]), concat(new_sets, first), ctx.config.threshold
    )
    pairs = candidates.pair_count(shared.groups, plan.first_new)
    chunks = -(-old.size // READ_CHUNK)
    if chunks > 1:
        # The pairs of two new contents come once; those with a stored one about once a chunk.
        alone = _prefix_groups(new, new_sets, ctx.config.threshold)
        own = candidates.pair_count(alone.groups, plan.first_new)
        pairs = own + (pairs - own) * chunks
    if 2 * pairs > work:
        return None
    return _chunked(ctx, reading, plan, groups, new, new_sets, old, shared, first)


def _chunked(
    ctx: BatchContext,
    reading: Scope,
    plan: BatchPlan,
    groups: Ragged,
    new: Pairs,
    new_sets: Ragged,
    old: Pairs,
    shared: PrefixGroups,
    sets: Ragged,
) -> Iterator[Part]:
    """The prefix filter's parts chunk by chunk of the stored members ``old`` (the first chunk's
    prefix groups and sets given); pairs of two new contents come with the first chunk only."""
    membership = candidates.Membership(groups)
    threshold, first_new = ctx.config.threshold, plan.first_new
    for start in range(0, max(old.size, 1), READ_CHUNK):
        chunk = old[start : start + READ_CHUNK]
        if start:
            sets = _chunk_sets(ctx, reading, chunk)
            shared = _prefix_groups(np.concatenate([new, chunk]), concat(new_sets, sets), threshold)
        order = np.argsort(np.abs(chunk), kind="stable")
        held = (np.abs(chunk)[order], sets.take(order))
        for cand in prefix_parts(shared, threshold, first_new):
            if start:
                cand = cand[cand[:, 0] < first_new]  # both new: paired with the first chunk
            kept = _kept(cand, membership)
            if kept.shape[0]:
                kept[:, 0] = np.abs(kept[:, 0])
                yield kept, held


@stage("candidate pairs: prefix filter, a shared bucket")
def _kept(cand: Pairs, membership: candidates.Membership) -> Pairs:
    """The pairs of ``cand`` (left by the prefix and positional filters) that share a bucket too."""
    return cand[membership.share(cand[:, 0], cand[:, 1])]


_prefix_groups = stage("candidate pairs: prefix groups")(prefix_groups)


@stage("candidate pairs: members' shingle sets")
def _chunk_sets(ctx: BatchContext, reading: Scope, chunk: Pairs) -> Ragged:
    """The sorted distinct shingle sets of the stored members ``chunk`` (as in the groups: ids of
    contents stored by later writers negated), from their texts."""
    wanted = np.abs(chunk).tolist()
    texts = documents.texts(reading, wanted) if wanted else {}
    return ctx.sketcher.shingles([texts[i] for i in wanted], unique=True)
