"""A batch's work before its turn at the collection's lock, with other writers about.

With ``add(..., concurrent=True)`` (as ``neardup add --jobs`` runs its writers), each batch does
its heavy work while other writers hold the lock (``before_turn``): it probes and verifies against
what is committed, in a snapshot on the second connection, takes content ids for its new texts
(``catalog.reserve``, committed at once) and COPYs their contents and signatures inside its own
transaction, and their bucket rows where the bucket index stands and nobody is building or dropping
it (``buckets.hold_indexed``). In its turn (``reconcile``) it matches its ids and hashes again
against what is committed: if another writer stored some of its new texts meanwhile, it deletes
what it wrote for those; if another dropped a content it reused, it deletes all it wrote and writes
its contents there and then; the rest stands. It then finds its candidates as always, so
completeness is kept, and verifies only those it had not judged (``verify_unjudged``): pairs with
what other writers committed meanwhile. If nobody wrote in between (the write counter did not
move), the probe is not repeated either. Documents are written in the turn: their external ids
must stay unique, and two writers holding the same id would wait on each other's rows.

A batch whose contents were written ahead (``ingest.ahead``) comes to its turn as such a batch,
with no probe or verdict of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from neardup import verification
from neardup.core.candidates import bucket_groups, candidate_parts
from neardup.core.lsh import bucket_rows, distinct_keys
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketch
from neardup.ingest import pairing, store
from neardup.ingest.context import BatchContext
from neardup.ingest.plan import Batch, BatchPlan, chunk_rows, plan_batch
from neardup.storage import buckets, catalog
from neardup.storage import documents as document_rows
from neardup.storage.scope import read_snapshot
from neardup.verification import Verified

Verdicts = dict[tuple[int, int], float]

# Candidate pairs (repeats across bands counted) a batch judges before its turn and holds as
# verdicts, a Python dict entry each (~200 bytes); a batch with more judges them in its turn, in
# parts (``core.candidates.candidate_parts``), so that its memory follows no hot bucket.
JUDGED_AHEAD = 1 << 17


@dataclass(frozen=True)
class Prework:
    """What a batch did before its turn at the collection's lock: the write counter of its
    snapshot, the stored members of its buckets then, its verdict on each candidate pair it
    verified (``pair_keys``: similarity, or -1 below the threshold), the plan whose new contents
    and signatures it wrote (None if it wrote none), and whether it wrote their bucket rows too."""

    writes: int
    stored: tuple[np.ndarray, ...]
    verdicts: Verdicts
    written: BatchPlan | None = None
    bucket_rows: bool = False


def pair_keys(cand: npt.NDArray[np.int64], plan: BatchPlan) -> list[tuple[int, int]]:
    """Keys of candidate pairs (stored or new content, new content) that survive a change of the
    batch's content ids: a stored content by its id, a new one by its position in the batch
    (a stored one as is, a new one as ``-1 - position`` on the left)."""
    left, right = plan.slots(cand[:, 0]), plan.slots(cand[:, 1])
    positions = plan.new_positions
    keys_left = np.where(left >= 0, -1 - positions[np.maximum(left, 0)], cand[:, 0])
    return list(zip(keys_left.tolist(), positions[right].tolist(), strict=True))


def plan_of(
    ctx: BatchContext,
    batch: Batch,
    sketch: Sketch,
    stored: list[document_rows.Match],
    row: catalog.CollectionRow,
    *,
    indexed: bool,
) -> BatchPlan:
    """``plan_batch`` of the batch against what is ``stored`` and the collection's counters."""
    return plan_batch(
        batch,
        sketch,
        stored,
        row.next_content_id,
        row.next_doc_id,
        store_text=ctx.config.store_text,
        indexed=indexed,
        band_keys=ctx.sketcher.band_keys,
    )


def before_turn(ctx: BatchContext, batch: Batch, sketch: Sketch, *, deferring: bool) -> Prework | None:
    """Before the batch's turn at the lock, inside its transaction: probe and verify it against
    what is committed, in one snapshot on the second connection, then take ids for its new
    contents and COPY them with their signatures. None where the batch will be written in bulk or
    with the bucket index deferred (``deferring``), which find candidates their own way."""
    second = ctx.second()
    with second.conn.transaction():
        read_snapshot(second.conn, read_only=False)  # members_of may fill a temporary table
        row = catalog.get(second, ctx.name)
        if row is None or row.collection_id != second.collection_id or row.next_content_id == 1:
            return None
        if deferring or not buckets.has_index(second):
            return None
        stored = document_rows.match(second, batch.ids, sketch.content_hashes)
        plan = plan_of(ctx, batch, sketch, stored, row, indexed=True)
        members: tuple[np.ndarray, ...] = ()
        verdicts: Verdicts = {}
        if plan.bearing_ids.size:
            members = buckets.members_of(second, *distinct_keys(plan.keys), most=chunk_rows(plan))
            rows = bucket_rows(plan.bearing_ids, plan.keys)
            groups = bucket_groups(*(np.concatenate([m, n]) for m, n in zip(members, rows, strict=True)))
            # Hot groups are linked in the turn (``pairing``), against the classes there then.
            groups = pairing.small_groups(groups)
            parts = candidate_parts(groups, first_new=plan.first_new, budget=JUDGED_AHEAD)
            cand = next(parts, None)
            # More candidates than that: judged in the batch's turn, in parts, not held here.
            if cand is not None and next(parts, None) is None:
                found = verification.verify_pairs(second, ctx.config, ctx.sketcher, cand, plan, sketch)
                verdicts = dict.fromkeys(pair_keys(cand, plan), -1.0)
                accepted = pair_keys(np.stack([found.left, found.right], axis=1), plan)
                verdicts.update(zip(accepted, found.similarity.tolist(), strict=True))
    if not plan.new_ids.size:
        return Prework(row.writes, members, verdicts)
    plan = plan.rebased(catalog.reserve(second, plan.new_ids.size))
    store.copy_contents(ctx.scope, plan, sketch, ctx.config.params)
    # Its bucket rows too, where the partition's index stands and nobody is building or
    # dropping it (an ingest into an empty collection defers it): see buckets.hold_indexed.
    with_rows = bool(plan.bearing_ids.size) and buckets.hold_indexed(ctx.scope)
    if with_rows:
        store.insert_indexed(ctx.scope, bucket_rows(plan.bearing_ids, plan.keys))
    return Prework(row.writes, members, verdicts, plan, with_rows)


def reconcile(
    ctx: BatchContext,
    plan: BatchPlan,
    sketch: Sketch,
    new_hashes: list[bytes],
    written: BatchPlan,
    rows_written: bool,
) -> tuple[BatchPlan, BatchPlan | None, bool]:
    """In the batch's turn, its ``plan`` against what is committed now, given the contents it
    ``written`` before (and their bucket rows, ``rows_written``): the plan with the ids of those
    that stand, and what stands of what was written (None, False if it all went)."""
    id_of = dict(zip(written.new_hashes(sketch), written.new_ids.tolist(), strict=True))
    keeps_index = not (rows_written and plan.bulk)
    if keeps_index and all(h in id_of for h in new_hashes):
        # Another writer may have stored some of the batch's new texts since its snapshot: what
        # it wrote for those goes, the rest stands.
        stale = id_of.keys() - set(new_hashes)
        if stale:
            store.withdraw(ctx, sorted(id_of[h] for h in stale), written, rows_written)
        ids = np.array([id_of[h] for h in new_hashes], dtype=np.int64)
        return plan.with_new_ids(ids, written.first_new), written, rows_written
    # Another writer dropped a content the batch reused: a text is new now that was not then.
    # Everything it wrote goes, and is written again with fresh ids.
    store.withdraw(ctx, written.new_ids.tolist(), written, rows_written)
    return plan, None, False


def verify_unjudged(
    ctx: BatchContext,
    cand: npt.NDArray[np.int64],
    plan: BatchPlan,
    sketch: Sketch,
    verdicts: Verdicts,
    held: tuple[npt.NDArray[np.int64], Ragged] | None = None,
) -> Verified:
    """``verify_pairs`` of the candidates without a verdict; the others as judged before."""
    found = [verdicts.get(k) for k in pair_keys(cand, plan)]
    judged = np.array([v is not None for v in found], dtype=bool)
    earlier = np.array([-1.0 if v is None else v for v in found])
    kept = judged & (earlier >= 0)
    if judged.all():
        return Verified(cand[kept, 0], cand[kept, 1], earlier[kept])
    unjudged = cand[~judged]
    left, right, sim = verification.verify_pairs(
        ctx.scope, ctx.config, ctx.sketcher, unjudged, plan, sketch, held
    )
    return Verified(
        np.concatenate([cand[kept, 0], left]),
        np.concatenate([cand[kept, 1], right]),
        np.concatenate([earlier[kept], sim]),
    )
