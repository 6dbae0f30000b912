"""Clusters computed again from their candidates, for stored contents: every content in a re-band,
the contents of the dense clusters a removal may have split.

A dense cluster's stored pairs connect it but are not all its pairs, so a removal that takes out a
content its stored pairs went through may leave parts that other candidates still join: its
components must come from the candidates, not the stored pairs. ``relink`` takes contents in
ranges of ids, each range as a batch of new contents against the ranges before it (``pairing``),
so memory follows a range; the classes start from the pairs still stored among them (valid edges),
and pairs already stored are not stored again. A component under the density bound gets every
pair it lacked, as a batch's does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from neardup import verification
from neardup.core import candidates
from neardup.core.candidates import bucket_groups
from neardup.core.components import Forest, component_labels
from neardup.core.fingerprints import fingerprints_of
from neardup.core.lsh import bucket_rows
from neardup.core.minhash import empty_rows
from neardup.core.ragged import Ragged
from neardup.ingest import store
from neardup.ingest.context import BatchContext
from neardup.ingest.pairing import Part, Sources, pair
from neardup.ingest.store import ranks, settle_clusters
from neardup.stages import stage
from neardup.storage import buckets, contents, fingerprints, verified_pairs
from neardup.storage import documents as document_rows
from neardup.verification import Verified

Ids = npt.NDArray[np.int64]

# Contents taken as new at a time: their signatures, sets and candidates are what a range holds.
RANGE = 50_000


def relink(
    ctx: BatchContext,
    groups: Ragged,
    content_ids: Ids,
    stored: tuple[Ids, Ids] = (np.zeros(0, np.int64), np.zeros(0, np.int64)),
) -> Forest:
    """The classes of ``content_ids`` (sorted) under the candidate pairs of ``groups`` (buckets of
    those contents only, each sorted), every content a key: the pairs ``stored`` (left < right,
    among them) joined first and not stored again; the other pairs each component needs stored
    (every one under the density bound, a connecting subset past it)."""
    forest = Forest()
    forest.add(content_ids)
    forest.union(*stored)
    known = _keys(*stored)
    members = np.asarray(groups.values, dtype=np.int64)
    for lo in range(0, content_ids.size, RANGE):
        chunk = content_ids[lo : lo + RANGE]
        part = _up_to(groups, members, int(chunk[-1]))
        if len(part):
            pair(part, int(chunk[0]), _sources(ctx, chunk, known), forest)
    forest.flatten()
    return forest


def _up_to(groups: Ragged, members: Ids, last: int) -> Ragged:
    """Each group's members up to ``last`` (a prefix, groups being ascending), groups of two or
    more only."""
    keep = members <= last
    counts = np.add.reduceat(keep.astype(np.int64), groups.offsets[:-1]) if members.size else keep
    counts = np.where(np.diff(groups.offsets) > 0, counts, 0)
    offsets = np.r_[0, np.cumsum(counts)].astype(np.int64)
    part = Ragged(members[keep], offsets)
    many = counts > 1
    lengths = counts[many]
    starts = offsets[:-1][many]
    at = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + np.arange(int(lengths.sum()))
    return Ragged(part.values[at], np.r_[0, np.cumsum(lengths)].astype(np.int64))


def _sources(ctx: BatchContext, chunk: Ids, known: npt.NDArray[np.complex128]) -> Sources:
    """A range's sources: every content stored (read on the batch's connection), each its own
    label (the forest joins them), pairs already stored left out."""
    config, scope = ctx.config, ctx.scope

    def verify(cand: Ids) -> Verified:
        return verification.verify_pairs(scope, config, ctx.sketcher, cand, None, None)

    def load(ids: Ids) -> tuple[npt.NDArray[np.uint32], Ragged | None]:
        return verification.signatures_and_sets(scope, config, ctx.sketcher, ids, None, None)

    def save(found: Verified) -> None:
        left, right = np.minimum(found.left, found.right), np.maximum(found.left, found.right)
        fresh = ~np.isin(_keys(left, right), known) if known.size else np.ones(left.size, dtype=bool)
        store.copy_pairs(ctx, Verified(left[fresh], right[fresh], found.similarity[fresh]))

    def exhaustive(groups: Ragged, first_new: int) -> Iterator[Part]:
        return ((cand, verify) for cand in candidates.candidate_parts(groups, first_new=first_new))

    return Sources(
        new_ids=chunk,
        verify=verify,
        labels=lambda ids: ids,
        sizes=lambda ids: np.ones(ids.size, dtype=np.int64),
        load=load,
        store=save,
        exhaustive=exhaustive,
        threshold=config.threshold,
        floor=verification.link_floor(config),
        exact=config.store_text,
        dense_cluster_size=config.params.dense_cluster_size,
    )


def _keys(left: Ids, right: Ids) -> npt.NDArray[np.complex128]:
    """One value per pair (left < right), exact for ids below 2**53."""
    return np.asarray(left, np.float64) + 1j * np.asarray(right, np.float64)


@stage("drop orphaned contents")
def drop_orphans(ctx: BatchContext, content_ids: Sequence[int]) -> list[int]:
    """Delete contents no document points at any more (with buckets, signatures, pairs) and
    recompute the clusters they were in, which may have split: from the pairs still stored where
    the cluster stored all of its (under the density bound), else from the candidates (``relink``),
    which also stores the pairs a part under the bound lacks."""
    if not content_ids:
        return []
    scope = ctx.scope
    orphan_ids, clusters_hit = contents.orphans(scope, sorted(set(content_ids)))
    if not orphan_ids:
        return []
    ids, sigs = contents.signatures(scope, orphan_ids, ctx.config.params.num_perm)
    buckets.delete(scope, *bucket_rows(ids, ctx.sketcher.band_keys(sigs)))
    if ctx.config.params.neighbours:
        fingerprints.delete(scope, orphan_ids)
    contents.delete(scope, orphan_ids)
    members, old = contents.cluster_members(scope, sorted(set(clusters_hit)))
    if members.size == 0:
        return orphan_ids
    left, right = verified_pairs.among(scope, members.tolist())
    component = component_labels(members, left, right)
    # A cluster was dense if it held the bound's contents before the orphans went.
    labels, sizes = np.unique(np.r_[old, np.asarray(clusters_hit, np.int64)], return_counts=True)
    was_dense = np.isin(old, labels[sizes >= ctx.config.params.dense_cluster_size])
    if was_dense.any():
        dense = members[was_dense]
        within = np.isin(left, dense) & np.isin(right, dense)
        forest = relink(ctx, _groups_of(ctx, dense), dense, (left[within], right[within]))
        component[was_dense] = forest.roots(dense)
    ctx.feed.clusters_changed(settle_clusters(scope, old, component, members))
    return orphan_ids


def _groups_of(ctx: BatchContext, content_ids: Ids) -> Ragged:
    """The buckets shared among ``content_ids`` (sorted), from their stored signatures."""
    ids, sigs = contents.signatures(ctx.scope, content_ids.tolist(), ctx.config.params.num_perm)
    bearing = ~empty_rows(sigs) if ids.size else np.zeros(0, dtype=bool)
    ids, sigs = np.asarray(ids, np.int64)[bearing], sigs[bearing]
    return bucket_groups(*bucket_rows(ids, ctx.sketcher.band_keys(sigs)))


def reband(ctx: BatchContext) -> None:
    """Re-bucket every content from its stored signature and recompute all pairs and clusters
    (clusters keep their ids as ``settle_clusters`` decides), a range of contents at a time
    (``relink``)."""
    scope = ctx.scope
    everyone, old = contents.all_labels(scope)
    ids, sigs = contents.signatures(scope, None, ctx.config.params.num_perm)
    bearing = ~empty_rows(sigs) if ids.size else np.zeros(0, dtype=bool)
    ids, sigs = ids[bearing], sigs[bearing]
    verified_pairs.delete_all(scope)
    buckets.truncate(scope)
    buckets.drop_index(scope)
    if ids.size:
        buckets.insert(scope, *bucket_rows(ids, ctx.sketcher.band_keys(sigs)))
    del sigs
    if ctx.config.params.neighbours:
        _refingerprint(ctx, ids)
    groups = bucket_groups(*buckets.shared_buckets(scope))
    buckets.create_index(scope, ctx.config.params.neighbours)
    forest = relink(ctx, groups, np.asarray(ids, dtype=np.int64))
    component = everyone.copy()
    held = np.isin(everyone, forest.keys)
    component[held] = forest.roots(everyone[held])
    settle_clusters(scope, old, component, everyone, ranks(scope, old, component, None))


# Contents whose texts a re-band reads and fingerprints at a time.
_REFINGERPRINT_BATCH = 10_000


@stage("fingerprints from the stored texts")
def _refingerprint(ctx: BatchContext, ids: np.ndarray) -> None:
    """Fingerprint every stored content ``ids`` again from its text (a re-band truncated them)."""
    for start in range(0, ids.size, _REFINGERPRINT_BATCH):
        chunk = ids[start : start + _REFINGERPRINT_BATCH].tolist()
        texts = document_rows.texts(ctx.scope, chunk)
        shingled = ctx.sketcher.shingles([texts[i] for i in chunk], unique=False)
        at, fp = fingerprints_of((shingled,), np.arange(len(chunk), dtype=np.int64), ctx.config.params.k)
        fingerprints.insert(ctx.scope, np.asarray(chunk, dtype=np.int64)[at], fp)
