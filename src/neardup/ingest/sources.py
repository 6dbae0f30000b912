"""Where a batch's pairing (``pairing.pair``) reads and how it verifies: the batch's new contents
from its sketch, the stored ones from the collection (on the connection that reads), verdicts
judged before the batch's turn kept."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from neardup import verification
from neardup.core.ragged import Ragged
from neardup.core.sketch import Sketch
from neardup.ingest import before_lock, hot_pairs, store
from neardup.ingest.before_lock import Verdicts
from neardup.ingest.context import BatchContext
from neardup.ingest.pairing import Part, Sources
from neardup.ingest.plan import BatchPlan
from neardup.stages import stage
from neardup.storage import contents
from neardup.storage.scope import Scope

Ids = npt.NDArray[np.int64]
Held = tuple[Ids, Ragged] | None
"""Shingle sets of stored contents read already (ids sorted), verified from these."""


def batch_sources(
    ctx: BatchContext, reading: Scope, plan: BatchPlan, sketch: Sketch, verdicts: Verdicts | None
) -> Sources:
    """A batch's sources: stored contents read on ``reading``, pairs stored and clusters settled on
    the batch's own connection; ``verdicts``: pairs judged before the turn, not verified again."""
    config = ctx.config

    def verify(cand: npt.NDArray[np.int64], held: Held = None) -> verification.Verified:
        if verdicts:
            return before_lock.verify_unjudged(ctx, cand, plan, sketch, verdicts, held)
        return verification.verify_pairs(reading, config, ctx.sketcher, cand, plan, sketch, held)

    def load(ids: Ids) -> tuple[npt.NDArray[np.uint32], Ragged | None]:
        return verification.signatures_and_sets(reading, config, ctx.sketcher, ids, plan, sketch)

    def exhaustive(groups: Ragged, first_new: int) -> Iterator[Part]:
        for cand, held in hot_pairs.candidate_parts(ctx, reading, plan, sketch, groups):
            yield cand, functools.partial(verify, held=held)

    return Sources(
        new_ids=np.sort(plan.new_ids),
        verify=verify,
        labels=_reader(reading, contents.label_array),
        sizes=_reader(reading, contents.cluster_sizes),
        load=load,
        store=lambda found: store.copy_pairs(ctx, found),
        exhaustive=exhaustive,
        threshold=config.threshold,
        floor=verification.link_floor(config),
        exact=config.store_text,
        dense_cluster_size=config.params.dense_cluster_size,
    )


def _reader(scope: Scope, read: Callable[[Scope, Ids], Ids]) -> Callable[[Ids], Ids]:
    @stage("pairs: read cluster labels and sizes")
    def run(ids: Ids) -> Ids:
        return read(scope, ids)

    return run
