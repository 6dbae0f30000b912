"""Measuring a collection against exact truth on a sample (``Index.evaluate``): the reads, the
exact set-similarity join, and the candidate test, summarised by ``evaluation.summarise``."""

from __future__ import annotations

import numpy as np

from neardup import own_pairs, validate
from neardup.config import IndexConfig
from neardup.core.distinct import distinct
from neardup.core.exact_join import JoinPairs, SetJoin, distinct_pairs
from neardup.core.sketch import Sketcher
from neardup.core.verify import signature_agreement
from neardup.errors import ParamsError, SchemaError, TextNotStoredError
from neardup.evaluation import Evaluation, default_floor, similarity_edges, summarise
from neardup.storage import contents, documents, statistics, verified_pairs
from neardup.storage.connect import transaction
from neardup.storage.scope import Scope, read_snapshot
from neardup.verification import hopeful

# Stored contents read and shingled per step of the scan: few round trips, and a step's texts and
# shingle arrays stay small beside the collection for texts of any usual length (the join bounds
# its own product).
EVALUATION_CHUNK = 2_000


def evaluate(
    scope: Scope,
    name: str,
    config: IndexConfig,
    sketcher: Sketcher,
    sample: int,
    seed: int,
    floor: float | None,
) -> Evaluation:
    """Recall and precision of the stored pairs against exact truth for a sample of contents (see
    ``Index.evaluate``); reads one snapshot."""
    if not config.store_text:
        raise TextNotStoredError(
            f"collection {name!r} stores no text (it was created without its texts), "
            "so there is nothing to compute the exact Jaccard from"
        )
    sample = validate.positive_int(sample, "sample")
    seed = validate.non_negative_int(seed, "seed")
    threshold = config.threshold
    floor = default_floor(threshold) if floor is None else float(floor)
    if not 0.0 < floor <= threshold:
        raise ParamsError(f"floor must be in (0, threshold = {threshold:g}], got {floor}")
    with transaction(scope.conn):
        read_snapshot(scope.conn)
        population = contents.bearing_ids(scope)
        rng = np.random.Generator(np.random.PCG64(seed))
        chosen = np.sort(rng.choice(population, size=min(sample, population.size), replace=False))
        texts = documents.texts(scope, chosen.tolist())
        join = SetJoin(sketcher.shingles([texts[i] for i in chosen.tolist()]), floor)
        found: list[JoinPairs] = []
        for ids, chunk in documents.content_texts(scope, EVALUATION_CHUNK):
            i, j, jaccard = join.pairs(sketcher.shingles(chunk))
            found.append((ids[i], chosen[j], jaccard))
        a, b, jaccard = distinct_pairs(found)
        stored_a, stored_b = verified_pairs.touching(scope, chosen.tolist())
        ends = distinct(np.concatenate([a, b]))
        ids, sigs = contents.signatures(scope, ends.tolist(), config.params.num_perm)
        if ids.size != ends.size:
            raise SchemaError(f"{ends.size - ids.size} stored contents have no signature")
        keys = sketcher.band_keys(sigs)
        at_a, at_b = np.searchsorted(ids, a), np.searchsorted(ids, b)
        candidate = (keys[at_a] == keys[at_b]).any(axis=1)
        # A dense cluster's pairs a user gets on demand (Index.cluster_pairs) count as found: the
        # candidates at or above the threshold that verification keeps, both in one dense cluster.
        dense = np.asarray([c for c, _, _ in statistics.dense_clusters(scope)], dtype=np.int64)
        on_demand = candidate & (jaccard >= threshold)
        if dense.size and on_demand.any():
            label = contents.label_array(scope, np.asarray(ids, dtype=np.int64))
            same = (label[at_a] == label[at_b]) & np.isin(label[at_a], dense)
            agree = hopeful(signature_agreement(sigs, at_a, at_b), threshold, config.params.num_perm)
            on_demand &= same & agree
        else:
            on_demand[:] = False
        edges = similarity_edges(floor, threshold)
        histogram = verified_pairs.histogram(scope, edges[:-1])
        check = own_pairs.recall_check(scope, config)
    return summarise(
        collection=name,
        threshold=threshold,
        bands=config.params.bands,
        rows=config.params.rows,
        floor=floor,
        seed=int(seed),
        population=int(population.size),
        sample_ids=chosen,
        truth=(a, b, jaccard),
        candidate=candidate,
        stored=(stored_a, stored_b),
        histogram=histogram,
        on_demand=on_demand,
        recall_check=check,
    )
