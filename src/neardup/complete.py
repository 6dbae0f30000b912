"""A cluster's complete pairs on demand: what the pairs table would hold for it if every pair were
stored, verified when read (a dense cluster stores only a connecting subset of them)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from neardup import verification
from neardup.config import IndexConfig
from neardup.core.sketch import Sketcher
from neardup.errors import ClusterNotFoundError
from neardup.storage import contents, documents, listings
from neardup.storage.scope import Scope


def cluster_pairs(
    url: str,
    scope: Scope,
    name: str,
    config: IndexConfig,
    sketcher: Sketcher,
    cluster_id: int,
    floor: float,
    doing: str,
) -> Iterator[tuple[str, str, float]]:
    """Every pair of documents of cluster ``cluster_id`` at or above ``floor`` (id_a < id_b,
    similarity): the copies of one text (1.0), then the candidate pairs of its contents verified
    (``verification.complete_pairs``), read in one snapshot on a connection of its own."""
    with listings.snapshot(url, scope, doing) as snap:
        members, _ = contents.cluster_members(snap, [cluster_id])
        if members.size == 0:
            raise ClusterNotFoundError(f"no cluster {cluster_id} in collection {name!r}")
        names = documents.external_ids(snap, members.tolist())
        for content in contents.bearing_among(snap, members.tolist()):
            yield from ((a, b, 1.0) for a, b in itertools.combinations(sorted(names.get(content, [])), 2))
        for found in verification.complete_pairs(snap, config, sketcher, members):
            ok = found.similarity >= floor
            left, right, sims = (
                found.left[ok].tolist(),
                found.right[ok].tolist(),
                found.similarity[ok].tolist(),
            )
            for a, b, sim in zip(left, right, sims, strict=True):
                for x, y in itertools.product(names.get(a, []), names.get(b, [])):
                    yield (x, y, sim) if x < y else (y, x, sim)
