"""A batch's candidates verified, linked into clusters and stored: the pairs a cluster needs.

Clusters are the connected components of the candidate pairs (sharing an LSH bucket) at or
above the threshold. A cluster of fewer than ``dense_cluster_size`` contents stores every such
pair, as a cluster always did; a larger one (dense) stores a verified subset that connects its
contents, so that its cost follows its contents, not their pairs. ``pair`` finds both at once:

1. groups (one band's bucket) of at most ``SMALL_GROUP`` members: every pair with a new member
   is enumerated, verified and stored (``candidates.candidate_parts``);
2. larger groups are linked (``core.linking``): each new member is tested against one member of
   each class of the members before it, classes seeded from the stored members' clusters (whose
   contents are connected already); the pairs that pass are stored. A group linking gives up
   (many classes, few pairs) is enumerated as the first step does (the caller's ``exhaustive``);
3. once the batch's components are known, those of fewer than ``dense_cluster_size`` contents get
   every candidate pair with a new member that the first steps did not verify: the pairs sharing
   a linked group inside the component, at most the bound's square over two per component.

A pair is stored once: the first step's pairs are its own; the others leave the pairs sharing a
small group, and the linked ones those sharing a group given up. What each step reads and how a
pair is verified are the caller's (``Sources``): an ingest's batch, a rebuild's range of contents,
the contents of clusters a removal broke.

Where a batch's buckets hold far more stored members than the batch (short records of one
template), the groups come in chunks of stored contents (``Chunked``): the first two steps run
chunk by chunk, the third once they are all done, so that what pairing holds follows the batch
and a chunk, not what is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from neardup.core import candidates, linking
from neardup.core.components import Forest
from neardup.core.distinct import distinct
from neardup.core.ragged import Ragged
from neardup.stages import stage
from neardup.verification import Verified

Ids = npt.NDArray[np.int64]
Pairs = npt.NDArray[np.int64]
Part = tuple[Pairs, Callable[[Pairs], Verified]]
"""Candidate pairs, and how to verify them (their maker may hold what verifies them)."""

# Groups of at most this many members have every pair enumerated and verified: below it, linking
# saves nothing worth its bookkeeping, and the pairs are stored whatever the cluster's size.
SMALL_GROUP = 64


@dataclass(frozen=True)
class Sources:
    """What pairing reads and how it verifies, for one batch of new contents."""

    new_ids: Ids
    """The new contents (sorted): labelled by their own ids, none stored before."""
    verify: Callable[[Pairs], Verified]
    """The candidate pairs (n x 2 content ids, positive) at or above the threshold."""
    labels: Callable[[Ids], Ids]
    """The cluster label of each stored content (ids sorted, distinct)."""
    sizes: Callable[[Ids], Ids]
    """The contents stored under each cluster label (labels sorted, distinct)."""
    load: linking.Load
    """Signatures and shingle sets of contents, for linking."""
    store: Callable[[Verified], None]
    """Store verified pairs (each once)."""
    exhaustive: Callable[[Ragged, int], Iterator[Part]]
    """Every candidate pair of groups (with a new member at or above the id given) in parts, or
    a superset of those at or above the threshold, and their verifier."""
    threshold: float
    floor: float
    """The signature agreement below which a linking test fails without an exact check."""
    exact: bool
    """Whether similarity is the exact Jaccard (texts stored) or the signature agreement."""
    dense_cluster_size: int


@dataclass(frozen=True)
class Paired:
    """What ``pair`` did: the cluster labels it joined (``nodes``) and each one's component now
    (a label of it), and how many pairs it stored."""

    nodes: Ids
    component: Ids
    stored: int


class Chunk(NamedTuple):
    """Groups of a batch's new members with one range of its stored members."""

    groups: Ragged
    sizes: Ids
    """Each group's size with all of its stored members counted (which decides how it is paired)."""
    keys: Ids
    """Each group's bucket (a mixed key), distinct within the chunk."""


@dataclass(frozen=True)
class Chunked:
    """A batch's groups in chunks of its stored members, so that what pairing holds follows the
    batch and a chunk, not what is stored: ``chunks(None)`` yields, each time it is called, the
    same chunks in the same order; each holds every row of a range of stored contents (the ranges
    disjoint), and every new member's, though a group without a stored member may come in the
    first chunk only. Once they were all read, ``chunks(ids)`` (new contents, sorted) yields the
    same ranges with only the groups of those contents' buckets."""

    chunks: Callable[[Ids | None], Iterator[Chunk]]


@dataclass(frozen=True)
class _ChunkDone:
    """What the first pass did with one chunk: pairs stored, linking's tests, and which of its hot
    groups were given up (their pairs enumerated)."""

    stored: int
    tested: Pairs
    given_up: npt.NDArray[np.bool_]


def pair(groups: Ragged | Chunked, first_new: int, sources: Sources, forest: Forest | None = None) -> Paired:
    """Verify, link and store the candidates of ``groups`` (each sorted ascending; members at or
    above ``first_new`` new, those below stored or, negated, stored by later writers) as the
    module's docstring says; ``forest``: classes known already (a rebuild's earlier ranges),
    labelled as ``sources.labels`` labels stored contents.

    Chunked groups go through the first two steps chunk by chunk, one forest joining them, and
    through the third once the last chunk is done, the chunks read again for the buckets of new
    contents in components under the bound (no other group has a pair to complete): a pair with a stored
    member is met in that member's chunk only, and a pair of two new members is enumerated in the
    first chunk only (linking in a later one may test it again, but stores a pair only where it
    joins two classes, which a pair stored before never does)."""
    forest = Forest() if forest is None else forest
    labels = _Labels(sources)
    if isinstance(groups, Chunked):
        chunks = groups.chunks
    else:
        whole = Chunk(groups, groups.lengths(), np.arange(len(groups), dtype=np.int64))
        chunks = lambda needed: iter([whole])  # noqa: E731
    stored, tested, given_up, linking_any = 0, [], [], False
    kept: Chunk | None = None
    for c, chunk in enumerate(chunks(None)):
        done = _first_pass(chunk.groups, chunk.sizes, c > 0, first_new, sources, forest, labels)
        stored += done.stored
        tested.append(done.tested)
        given_up.append(chunk.keys[chunk.sizes > SMALL_GROUP][done.given_up])
        linking_any |= bool((~done.given_up).any())
        kept = chunk if c == 0 else None  # a single chunk is not read again
    if not linking_any:
        return _done(forest, labels, stored)
    if kept is not None:
        again: Iterator[Chunk] = iter([kept])
    else:
        # Only groups holding a new content of a component under the bound have pairs left to
        # complete (a pair completed has a new member, and both in one such component): the
        # crowded buckets of dense clusters are not read again.
        needed = _under_bound(forest, sources)
        if needed.size == 0:
            return _done(forest, labels, stored)
        again = chunks(needed)
    verified = _pair_keys(np.abs(np.concatenate(tested)))
    for c, chunk in enumerate(again):
        up = np.isin(chunk.keys[chunk.sizes > SMALL_GROUP], given_up[c])
        stored += _second_pass(
            chunk.groups, chunk.sizes, c > 0, up, verified, first_new, sources, forest, labels
        )
    return _done(forest, labels, stored)


def _first_pass(
    groups: Ragged,
    sizes: Ids,
    later: bool,
    first_new: int,
    sources: Sources,
    forest: Forest,
    labels: _Labels,
) -> _ChunkDone:
    """The first two steps for one chunk's groups (``later``: not the first chunk)."""
    small, hot = _subset(groups, sizes <= SMALL_GROUP), _subset(groups, sizes > SMALL_GROUP)
    stored = 0
    for cand in candidates.candidate_parts(small, first_new=first_new):
        if later:
            cand = cand[cand[:, 0] < first_new]  # both new: paired in the first chunk
        cand[:, 0] = np.abs(cand[:, 0])
        if cand.shape[0]:
            stored += _store_and_join(sources, forest, labels, sources.verify(cand))
    if len(hot) == 0:
        return _ChunkDone(stored, np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=bool))
    in_small = candidates.Membership(small)
    linked = _link(hot, first_new, sources, forest, labels)
    given_up = _subset(hot, linked.given_up)
    # Linking's verdicts stand for the groups given up too: their enumeration skips what it tested.
    kept = _outside(np.stack([linked.left, linked.right], axis=1), in_small, None)
    ok = np.zeros(linked.left.size, dtype=bool)
    ok[kept] = True
    stored += _store(
        sources, Verified(np.abs(linked.left[ok]), np.abs(linked.right[ok]), linked.similarity[ok])
    )
    tested = _pair_keys(np.abs(linked.tested))
    for cand, verify in sources.exhaustive(given_up, first_new):
        cand = cand[_outside(cand, in_small, None)]
        cand[:, 0] = np.abs(cand[:, 0])
        if later:
            cand = cand[~_both_new(cand, sources.new_ids)]
        if tested.size:
            cand = cand[~np.isin(_pair_keys(cand), tested)]
        if cand.shape[0]:
            stored += _store_and_join(sources, forest, labels, verify(cand))
    return _ChunkDone(stored, linked.tested, linked.given_up)


def _second_pass(
    groups: Ragged,
    sizes: Ids,
    later: bool,
    given_up: npt.NDArray[np.bool_],
    tested: npt.NDArray[np.complex128],
    first_new: int,
    sources: Sources,
    forest: Forest,
    labels: _Labels,
) -> int:
    """The third step for one chunk's groups, its hot groups given up (``given_up``) as the
    first pass gave them up, and every chunk's linking tests (``tested``) known."""
    small, hot = _subset(groups, sizes <= SMALL_GROUP), _subset(groups, sizes > SMALL_GROUP)
    if len(hot) == 0:
        return 0
    in_small = candidates.Membership(small)
    linking_groups = _subset(hot, ~given_up)
    return _complete(
        linking_groups, first_new, sources, forest, labels, in_small, _subset(hot, given_up), tested, later
    )


def _both_new(cand: Pairs, new_ids: Ids) -> npt.NDArray[np.bool_]:
    """Whether both ids of each pair are new contents (``new_ids`` sorted)."""
    if new_ids.size == 0:
        return np.zeros(cand.shape[0], dtype=bool)
    at = np.minimum(np.searchsorted(new_ids, cand), new_ids.size - 1)
    return (new_ids[at] == cand).all(axis=1)  # type: ignore[no-any-return]


def small_groups(groups: Ragged) -> Ragged:
    """The groups whose every pair ``pair`` enumerates and verifies."""
    return _subset(groups, groups.lengths() <= SMALL_GROUP)


class _Labels:
    """Cluster labels of contents: a new content's is its id, a stored one's read once."""

    def __init__(self, sources: Sources) -> None:
        self._sources = sources
        self._ids = np.zeros(0, dtype=np.int64)
        self._labels = np.zeros(0, dtype=np.int64)

    def of(self, content_ids: Ids) -> Ids:
        """The label of each content (ids positive)."""
        ids = np.asarray(content_ids, dtype=np.int64)
        new = np.isin(ids, self._sources.new_ids)
        wanted = distinct(ids[~new])
        missing = wanted[~np.isin(wanted, self._ids)]
        if missing.size:
            read = self._sources.labels(missing)
            order = np.argsort(np.r_[self._ids, missing], kind="stable")
            self._ids = np.r_[self._ids, missing][order]
            self._labels = np.r_[self._labels, read][order]
        out = ids.copy()
        out[~new] = self._labels[np.searchsorted(self._ids, ids[~new])]
        return out


def _subset(groups: Ragged, keep: npt.NDArray[np.bool_]) -> Ragged:
    """The groups where ``keep``."""
    lengths = groups.lengths()
    values = np.asarray(groups.values, dtype=np.int64)[np.repeat(keep, lengths)]
    return Ragged(values, np.r_[0, np.cumsum(lengths[keep])].astype(np.int64))


def _outside(cand: Pairs, small: candidates.Membership, given_up: Ragged | None) -> Ids:
    """Positions of the pairs (member ids as in the groups) that share no small group and no
    group given up: the pairs those groups' enumeration verifies."""
    if cand.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    shared = _share(small, cand)
    if given_up is not None and len(given_up):
        shared |= _share(candidates.Membership(given_up), cand)
    return np.flatnonzero(~shared)


def _share(membership: candidates.Membership, cand: Pairs) -> npt.NDArray[np.bool_]:
    """Whether each pair's two members share one of the membership's groups (members of none
    share none)."""
    a, b = cand[:, 0], cand[:, 1]
    known = np.isin(a, membership.ids) & np.isin(b, membership.ids)
    out = np.zeros(cand.shape[0], dtype=bool)
    if known.any():
        out[known] = membership.share(a[known], b[known])
    return out


def _store(sources: Sources, found: Verified) -> int:
    if found.left.size:
        sources.store(found)
    return int(found.left.size)


def _store_and_join(sources: Sources, forest: Forest, labels: _Labels, found: Verified) -> int:
    """Store verified pairs and join their ends' clusters."""
    if found.left.size:
        sources.store(found)
        forest.union(labels.of(found.left), labels.of(found.right))
    return int(found.left.size)


@stage("pairs: link hot groups")
def _link(
    groups: Ragged, first_new: int, sources: Sources, forest: Forest, labels: _Labels
) -> linking.Linked:
    """``linking.link`` of the hot groups, their members' clusters the forest's nodes."""
    members = np.abs(np.asarray(groups.values, dtype=np.int64))
    member_labels = labels.of(members)
    forest.add(member_labels)
    forest.flatten()
    node = forest.index(member_labels)
    # Groups of too many classes to link are given up here, before linking holds their members.
    crowded = linking.crowded(groups, first_new, forest.parent[node])
    parent = forest.parent.copy()
    linked = linking.link(
        _subset(groups, ~crowded),
        first_new,
        node[np.repeat(~crowded, groups.lengths())],
        parent,
        sources.load,
        sources.threshold,
        sources.floor,
        sources.exact,
    )
    forest.parent = parent
    forest.flatten()
    given_up = crowded.copy()
    given_up[~crowded] = linked.given_up
    return replace(linked, given_up=given_up)


def _done(forest: Forest, labels: _Labels, stored: int) -> Paired:
    forest.flatten()
    return Paired(forest.keys.copy(), forest.keys[forest.parent], stored)


@stage("pairs: complete pairs of the clusters under the density bound")
def _complete(
    groups: Ragged,
    first_new: int,
    sources: Sources,
    forest: Forest,
    labels: _Labels,
    small: candidates.Membership,
    given_up: Ragged,
    tested: npt.NDArray[np.complex128],
    later: bool = False,
) -> int:
    """Verify and store the pairs sharing a linked group inside each component of fewer than
    ``dense_cluster_size`` contents, less those verified already (``tested`` by linking; those
    of two new members where ``later``, a chunk after the first)."""
    if len(groups) == 0:
        return 0
    forest.flatten()
    members = np.asarray(groups.values, dtype=np.int64)
    root = forest.roots(labels.of(np.abs(members)))
    size = _component_sizes(forest, sources)
    under = size[np.searchsorted(forest.keys, root)] < sources.dense_cluster_size
    group = np.repeat(np.arange(len(groups), dtype=np.int64), groups.lengths())
    # Sub-groups: the members of one group in one small component.
    keep = np.flatnonzero(under)
    order = keep[np.lexsort((members[keep], root[keep], group[keep]))]
    g, r, m = group[order], root[order], members[order]
    starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (r[1:] != r[:-1])]) if m.size else m
    sub = Ragged(m, np.r_[starts, m.size].astype(np.int64))
    stored = 0
    for cand in candidates.candidate_parts(sub, first_new=first_new):
        if later:
            cand = cand[cand[:, 0] < first_new]
        cand = cand[_outside(cand, small, given_up)]
        cand = np.abs(cand)
        cand = cand[~np.isin(_pair_keys(cand), tested)]
        if cand.shape[0]:
            stored += _store(sources, sources.verify(cand))
    return stored


def _under_bound(forest: Forest, sources: Sources) -> Ids:
    """The new contents in the forest (those of hot groups) whose component holds fewer than
    ``dense_cluster_size`` contents, sorted."""
    forest.flatten()
    new = sources.new_ids[np.isin(sources.new_ids, forest.keys)]
    if new.size == 0:
        return new
    size = _component_sizes(forest, sources)
    return new[size[np.searchsorted(forest.keys, forest.roots(new))] < sources.dense_cluster_size]


def _component_sizes(forest: Forest, sources: Sources) -> Ids:
    """The contents of each key's component (indexed as ``forest.keys``; meaningful at roots)."""
    keys = forest.keys
    new = np.isin(keys, sources.new_ids)
    size = np.ones(keys.size, dtype=np.int64)
    if (~new).any():
        size[~new] = sources.sizes(keys[~new])
    out = np.zeros(keys.size, dtype=np.int64)
    np.add.at(out, forest.parent, size)
    return out


def _pair_keys(pairs: Pairs) -> npt.NDArray[np.complex128]:
    """One value per pair (smaller id first), equal exactly for equal pairs: both ids in one
    complex number, exact for ids below 2**53."""
    if pairs.shape[0] == 0:
        return np.zeros(0, dtype=np.complex128)
    a, b = np.minimum(pairs[:, 0], pairs[:, 1]), np.maximum(pairs[:, 0], pairs[:, 1])
    return a.astype(np.float64) + 1j * b.astype(np.float64)
