"""The writer's statements beyond one batch's plan: the collection's lock, contents, documents,
pairs and clusters written, orphans dropped, and every bucket and pair computed again (a re-band)."""

from __future__ import annotations

import numpy as np

from neardup.core.cluster_ids import ALONE, NEW, SHOWN, ClusterChanges, decide_clusters
from neardup.core.components import component_labels
from neardup.core.distinct import distinct
from neardup.core.fingerprints import fingerprints_of
from neardup.core.lsh import bucket_rows
from neardup.core.params import Params
from neardup.core.sketch import Sketch
from neardup.errors import CollectionNotFoundError
from neardup.ingest.context import BatchContext
from neardup.ingest.plan import Batch, BatchPlan
from neardup.stages import stage
from neardup.storage import buckets, catalog, contents, fingerprints, statistics, verified_pairs
from neardup.storage import documents as document_rows
from neardup.storage.scope import Scope
from neardup.verification import Verified

# Similarity methods stored with each pair.
EXACT, ESTIMATE = "exact", "estimate"
# A batch that stores at least this many new contents, more than the collection held before it,
# refreshes the planner's statistics before it commits: until autovacuum's ANALYZE (a minute or
# more later), the planner guesses a partition's rows, and on a large ingest it guessed badly
# (every stored text of the collection scanned to read a batch's few thousand). Smaller
# partitions are a few pages, quick under any plan.
ANALYZE_AFTER = 1_000


def lock(ctx: BatchContext) -> catalog.CollectionRow:
    """Lock the collection's row for this transaction and check it is still the one opened."""
    row = catalog.get(ctx.scope, ctx.name, lock=True)
    if row is None or row.collection_id != ctx.scope.collection_id:
        raise CollectionNotFoundError(f"collection {ctx.name!r} was dropped or rebuilt since it was opened")
    Params.from_dict(row.params).require_same(ctx.config.params, "stored", "opened with")
    return row


def insert_contents(scope: Scope, plan: BatchPlan, sketch: Sketch, params: Params) -> None:
    """Store the plan's new contents and their signatures (binary COPY in ``contents.insert``), and
    their fingerprints where the collection keeps its neighbours."""
    contents.insert(
        scope,
        plan.new_ids,
        plan.new_hashes(sketch),
        sketch.shingle_counts[plan.new_positions],
        sketch.signatures[plan.new_positions],
    )
    if params.neighbours:
        at, fp = fingerprints_of(sketch.shingles, plan.new_positions, params.k)
        fingerprints.insert(scope, plan.new_ids[at], fp)


copy_contents = stage("contents and signatures: binary COPY")(insert_contents)


@stage("bucket rows: binary COPY into the index")
def insert_indexed(scope: Scope, rows: tuple[np.ndarray, ...]) -> None:
    """Bucket rows into the partition whose index stands."""
    buckets.insert(scope, *rows)


@stage("delete replaced documents")
def delete_replaced(scope: Scope, plan: BatchPlan) -> list[int]:
    """Delete the documents the batch replaces; returns the contents they pointed at."""
    return document_rows.delete(scope, plan.replaced_docs) if plan.replaced_docs else []


def insert_documents(ctx: BatchContext, batch: Batch, plan: BatchPlan) -> None:
    """The batch's documents (binary COPY)."""
    positions = plan.doc_positions.tolist()
    document_rows.insert(
        ctx.scope,
        plan.doc_ids,
        [batch.ids[i] for i in positions],
        plan.doc_contents,
        [batch.texts[i] if ctx.config.store_text else None for i in positions],
        [batch.metas[i] for i in positions],
    )


@stage("advance the id counters")
def advance(scope: Scope, plan: BatchPlan) -> int:
    """Advance the collection's counters past the batch; returns its write counter."""
    return catalog.advance(scope, plan.next_doc_id)


def refresh_statistics(scope: Scope, plan: BatchPlan) -> None:
    """Refresh the planner's statistics after a batch that grew the collection much (``ANALYZE_AFTER``),
    and the partitioned tables' own where they have none."""
    if scope.distributed:
        return
    grown = plan.new_ids.size
    # Contents stored before this batch: those below its ids (a batch that took its ids before
    # its turn finds them counted in the row).
    if grown >= ANALYZE_AFTER and grown > plan.first_new - 1:
        _refresh(scope)
    _parents(scope)


@stage("refresh the planner's statistics")
def _refresh(scope: Scope) -> None:
    statistics.refresh_planner_statistics(scope)


@stage("the partitioned tables' statistics, where they have none")
def _parents(scope: Scope) -> None:
    statistics.keep_parent_statistics(scope)


@stage("contents written before the lock, withdrawn")
def withdraw(ctx: BatchContext, content_ids: list[int], written: BatchPlan, with_rows: bool) -> None:
    """Delete contents and signatures the batch wrote before its turn, and their bucket rows
    ``with_rows`` (nothing else names them yet). A DELETE, not a rollback to a savepoint, which
    would also release the lock taken since."""
    if with_rows:
        going = np.isin(written.bearing_ids, np.asarray(content_ids, dtype=np.int64))
        if going.any():
            buckets.delete(ctx.scope, *bucket_rows(written.bearing_ids[going], written.keys[going]))
    if ctx.config.params.neighbours:
        fingerprints.delete(ctx.scope, content_ids)
    contents.delete(ctx.scope, content_ids)


def copy_pairs(ctx: BatchContext, found: Verified) -> None:
    """Store verified pairs (as content_a < content_b), leaving clusters to the caller."""
    if found.left.size:
        left, right = np.minimum(found.left, found.right), np.maximum(found.left, found.right)
        _copy_pairs(ctx, left, right, found.similarity)


@stage("merge clusters")
def join_clusters(ctx: BatchContext, nodes: np.ndarray, component: np.ndarray, new_ids: np.ndarray) -> None:
    """Settle the clusters a batch joined: ``nodes`` are cluster labels (a new content's is its
    id, one of ``new_ids``), ``component`` a label of each one's component now. None can split."""
    joined = np.unique(component, return_counts=True)
    many = joined[0][joined[1] > 1]
    keep = np.isin(component, many)
    nodes, component = nodes[keep], component[keep]
    if nodes.size == 0:
        return
    new = np.isin(nodes, new_ids)
    ctx.feed.clusters_changed(
        settle_clusters(ctx.scope, nodes, component, rank=ranks(ctx.scope, nodes, component, new))
    )


def store_pairs(ctx: BatchContext, found: Verified, new_ids: np.ndarray | None = None) -> None:
    """Store verified pairs and join the clusters they connect (``new_ids``: the batch's new
    contents, which join clusters rather than merge them; see ``settle_clusters``)."""
    if found.left.size == 0:
        return
    # Stored as content_a < content_b.
    left, right = np.minimum(found.left, found.right), np.maximum(found.left, found.right)
    _copy_pairs(ctx, left, right, found.similarity)
    ctx.feed.clusters_changed(_merge_clusters(ctx.scope, left, right, new_ids))


@stage("pairs: binary COPY")
def _copy_pairs(ctx: BatchContext, left: np.ndarray, right: np.ndarray, sim: np.ndarray) -> None:
    method = EXACT if ctx.config.store_text else ESTIMATE
    verified_pairs.insert(ctx.scope, left, right, sim, method)


@stage("merge clusters")
def _merge_clusters(
    scope: Scope, left: np.ndarray, right: np.ndarray, new_ids: np.ndarray | None
) -> ClusterChanges:
    """Join the clusters that new pairs connect: each cluster is one node (labelled by its id),
    so none can split here. Returns the merges decided."""
    ends = distinct(np.concatenate([left, right]))
    labels = contents.cluster_labels(scope, ends.tolist())
    label_of = np.array([labels[i] for i in ends.tolist()], dtype=np.int64)
    la, lb = label_of[np.searchsorted(ends, left)], label_of[np.searchsorted(ends, right)]
    nodes = distinct(label_of)
    component = component_labels(nodes, la, lb)
    new = np.isin(nodes, new_ids) if new_ids is not None else None
    return settle_clusters(scope, nodes, component, rank=ranks(scope, nodes, component, new))


def ranks(scope: Scope, old: np.ndarray, component: np.ndarray, new: np.ndarray | None) -> np.ndarray:
    """Each node's rank for ``decide_clusters``: NEW for ``new`` ones; of the others, where two or
    more old clusters meet in one component, SHOWN for those of two or more documents and ALONE
    for the rest (read only there: elsewhere the rank decides nothing)."""
    rank = np.where(new, NEW, SHOWN) if new is not None else np.full(old.size, SHOWN)
    existing = rank != NEW
    links = np.unique(np.stack([component[existing], old[existing]], axis=1), axis=0)
    comps, counts = np.unique(links[:, 0], return_counts=True)
    meeting = links[np.isin(links[:, 0], comps[counts > 1]), 1]
    if meeting.size:
        shown = contents.shown_clusters(scope, meeting.tolist())
        rank[existing & np.isin(old, meeting) & ~np.isin(old, shown)] = ALONE
    return rank


def settle_clusters(
    scope: Scope,
    old: np.ndarray,
    component: np.ndarray,
    content_ids: np.ndarray | None = None,
    rank: np.ndarray | None = None,
) -> ClusterChanges:
    """The one place clusters are relabelled after a write (merges and splits are decided here,
    nowhere else). Nodes are every content of the clusters touched (``content_ids``, with their
    ``old`` cluster ids), or with ``content_ids`` None the clusters themselves (``old``, one node
    each: a merge); ``component`` is each node's connected component now. ``decide_clusters``
    decides which ids survive (the oldest survives a merge; the parts of a split get ids never
    used, taken from the content id counter); the labels that changed are stored. Returns the
    merges and splits decided (``rank``: see ``_ranks``)."""
    changes = decide_clusters(old, component, lambda n: catalog.reserve(scope, n), rank)
    moved = changes.labels != old
    if moved.any():
        if content_ids is None:  # relabel every content of each moved cluster
            contents.relabel_clusters(scope, old[moved].tolist(), changes.labels[moved].tolist())
        else:
            contents.set_labels(scope, content_ids[moved].tolist(), changes.labels[moved].tolist())
    return changes


def restore_clusters(ctx: BatchContext, counter_before: int) -> None:
    """After a rebuild wrote every stashed document again (new contents, each labelled by its new
    id): give each cluster the id its documents' cluster had before, as ``settle_clusters``
    decides at the level of documents. The content id counter first goes past where it was, so
    that ids taken since and from now on were never used."""
    catalog.reserve_past(ctx.scope, counter_before)
    content_ids, now, before = document_rows.stashed_clusters(ctx.scope)
    if content_ids.size == 0:
        return
    # Ranked as shown (two or more documents) or alone by the stashed labels.
    labels, sizes = np.unique(before, return_inverse=True, return_counts=True)[1:]
    rank = np.where(sizes[labels] > 1, SHOWN, ALONE)
    changes = decide_clusters(before, now, lambda n: catalog.reserve(ctx.scope, n), rank)
    # Documents of one content are in one component, so they agree on its id.
    first = np.unique(content_ids, return_index=True)[1]
    contents.set_labels(ctx.scope, content_ids[first].tolist(), changes.labels[first].tolist())
