"""The public Index: one named collection of documents in PostgreSQL, and what can be done with it.

Each method is a few lines over the modules that do the work: ``config`` (the threshold and
parameters, checked), ``ingest`` (writing batches, removals and rebuilds), ``search`` (a text's
near-duplicates), ``storage.listings`` (pairs and clusters, streamed) and ``measure`` (recall and
precision against exact truth).
"""

from __future__ import annotations

import itertools
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, overload

from neardup import complete, neighbours, validate
from neardup.arrow import Table, rows_of
from neardup.collection import Collection, config_of, open_collection
from neardup.config import DEFAULT_BATCH_SIZE, DEFAULT_KEEP, DEFAULT_THRESHOLD, IndexConfig, check_keep
from neardup.core.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, Scheme
from neardup.core.normalize import CaseMode, UnicodeForm
from neardup.core.params import DEFAULT_DENSE_CLUSTER_SIZE, DEFAULT_NEIGHBOUR_FLOOR, Params
from neardup.core.shingle import ShingleKind
from neardup.core.sketch import Sketcher
from neardup.core.tuning import DEFAULT_RECALL_AT_THRESHOLD, check_threshold
from neardup.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    Hint,
    NeardupError,
    ParamsError,
    ParamsMismatchError,
    UnicodeVersionWarning,
)
from neardup.neighbours import Contained, Direction
from neardup.records import Record, to_document
from neardup.result import AddResult
from neardup.search import CheckResult, check_all, similar
from neardup.stages import NO_CLOCK, StageClock
from neardup.storage import catalog, citus, fingerprints, listings, migrate, statistics
from neardup.storage import documents as document_rows
from neardup.storage.connect import Connection, connect, redacted, transaction, translated
from neardup.storage.names import DEFAULT_SCHEMA, check_collection_name
from neardup.storage.scope import Scope

# What only some methods use (the feed, evaluation, the own-pairs check) is imported in them, so
# that opening a collection for a query loads none of it.
if TYPE_CHECKING:
    from neardup.core.recall_check import RecallCheck
    from neardup.evaluation import Evaluation
    from neardup.ingest.writer import Writer
    from neardup.storage.changes import ChangesPage

# Documents checked per round trip: one bucket probe and one read of signatures and texts each.
CHECK_BATCH_SIZE = 10_000


@dataclass(frozen=True)
class Stats:
    """Counts, sizes and parameters of a collection.

    ``contents`` are the distinct (normalised) texts; ``pairs`` the stored near-duplicate pairs of
    distinct texts (what ``AddResult.new_pairs`` counts); ``identical_pairs`` the pairs of
    documents with one text; ``document_pairs`` the pairs of documents ``pairs()`` lists: each
    stored pair once for every two documents of its texts, plus the identical pairs; ``clusters``
    those of two or more documents, as ``clusters()`` lists them."""

    name: str
    documents: int
    contents: int
    pairs: int
    identical_pairs: int
    document_pairs: int
    clusters: int
    bucket_rows: int
    bytes_on_disk: int
    largest_buckets: list[tuple[int, int, int]]
    params: Params
    threshold: float
    store_text: bool
    expected_fp_rate: float
    expected_fn_rate: float
    candidate_probability_at_threshold: float
    """The S-curve at the threshold: P(candidate) of a pair exactly there."""
    expected_threshold_bin_recall: float
    """The S-curve's mean over [threshold, threshold + 0.05), the pairs placed by the tuner's
    prior (``core.tuning.prior_density``): the expected recall there before any pair is stored."""
    bytes_by_table: dict[str, tuple[int, int]]
    """Bytes on disk of each table's partition: (rows with their TOAST, indexes)."""
    neighbour_rows: int = 0
    """Text fingerprints kept for top-k and containment queries (0 unless ``neighbours``)."""
    neighbour_bytes: int = 0
    """Their bytes on disk: their share of the bucket partition and its index, their own indexes,
    and the content ids the lookup index carries in the bands' entries for them (approximate)."""
    dense_clusters: int = 0
    """Clusters of ``dense_cluster_size`` contents or more: their stored pairs are a verified subset
    that connects them, not every pair (``cluster_pairs`` gives those)."""
    dense_contents: int = 0
    """The contents of those clusters."""
    dense_documents: int = 0
    """Their documents."""
    recall_check: RecallCheck | None = None
    """The threshold bin's expected recall from the collection's own stored pairs there, and the
    rebuild that would restore the target when it falls under (approximate)."""
    keep: str = "first"
    """Which document of a cluster is its representative (``Index.keep``)."""
    changes_feed: bool = False
    """Whether the collection's writes are numbered in a changes feed."""
    changes_retention_hours: float | None = None
    """How long the feed keeps a change, in hours (None: every change, or no feed)."""
    counted: str = "exact"
    """How the counts of documents, contents, pairs and clusters were found: ``"exact"`` (counted
    now), or ``"estimated"`` from a sample of the contents (a distributed collection of more
    contents than ``storage.statistics.ESTIMATE_ABOVE``, where a count is a scan of every shard;
    the dense clusters are then those the sample meets, each counted whole)."""

    def counts(self) -> dict[str, object]:
        """The counts under the names every surface gives them (``text_pairs`` is ``pairs``), and
        how they were found."""
        return {
            "documents": self.documents,
            "contents": self.contents,
            "text_pairs": self.pairs,
            "identical_pairs": self.identical_pairs,
            "document_pairs": self.document_pairs,
            "clusters": self.clusters,
            "counts": self.counted,
        }


class Cluster(list[str]):
    """One cluster of two or more documents: its ids, sorted (it is a list of them), with its
    ``id``, which lasts across writes (README, "Cluster ids"), its ``representative``, the
    document kept under the collection's ``keep`` policy, and whether it is ``dense`` (of
    ``dense_cluster_size`` contents or more: ``pairs`` lists a verified subset of its pairs that
    connects it, ``cluster_pairs`` all of them)."""

    def __init__(self, ids: Iterable[str], cluster_id: int, representative: str, dense: bool = False) -> None:
        super().__init__(ids)
        self.id, self.representative, self.dense = cluster_id, representative, dense

    def __repr__(self) -> str:
        dense = ", dense=True" if self.dense else ""
        return f"Cluster(id={self.id}, representative={self.representative!r}{dense}, ids={list(self)!r})"


def _shards(shards: int | None, distributed: bool | None) -> int | None:
    """The shards asked for, checked: a count, and only for a distributed collection."""
    if shards is None:
        return None
    if distributed is not True:
        raise ParamsError(
            f"shards = {shards!r} is for a distributed collection", hint=Hint("make one with", "distributed")
        )
    return validate.positive_int(shards, "shards")


def _created(
    scope: Scope,
    url: str,
    name: str,
    config: IndexConfig,
    distributed: bool | None,
    shards: int | None,
    exist_ok: bool,
    keep: str,
    feed: tuple[bool, timedelta | None],
) -> catalog.CollectionRow:
    """The catalog row of collection ``name``, made now (its schema distributed first where asked,
    its neighbours' tables prepared), or the existing one with ``exist_ok`` and equal parameters."""
    with translated(f"preparing schema {scope.schema!r} for collection {name!r}"), transaction(scope.conn):
        placed = citus.prepare(scope, distributed, shards, redacted(url))
    with translated(f"creating collection {name!r}"), transaction(scope.conn):
        row = _insert_or_reuse(scope, name, config, placed, exist_ok, keep, feed)
        if config.params.neighbours:
            fingerprints.prepare(scope.with_collection(row.collection_id, placed))
    return row


def _insert_or_reuse(
    scope: Scope,
    name: str,
    config: IndexConfig,
    distributed: bool,
    exist_ok: bool,
    keep: str,
    feed: tuple[bool, timedelta | None] = (False, None),
) -> catalog.CollectionRow:
    """The row of a new collection ``name`` (keeping a changes feed as ``feed`` says), or with
    ``exist_ok`` of the existing one if its parameters (and representative policy) are these."""
    catalog.lock_name(scope, name)
    row = catalog.get(scope, name)
    if row is None:
        return catalog.insert(
            scope,
            name,
            config.params.to_dict(),
            config.threshold,
            config.store_text,
            unicodedata.unidata_version,
            distributed,
            keep,
            *feed,
        )
    if not exist_ok:
        raise CollectionExistsError(
            f"collection {name!r} exists already", hint=Hint("open it, or reuse it with", "exist_ok")
        )
    config_of(row).require_same(config)
    if row.keep != keep:
        raise ParamsMismatchError(f"parameters differ (stored != requested): keep: {row.keep!r} != {keep!r}")
    return row


def _neighbour_size(scope: Scope, params: Params) -> dict[str, int]:
    """The neighbours' rows and bytes, read only for a collection that keeps them."""
    if not params.neighbours:
        return {}
    rows, size = fingerprints.size(scope)
    return {"neighbour_rows": rows, "neighbour_bytes": size}


class Index:
    """A near-duplicate index stored in PostgreSQL: one named collection of documents.

    An Index holds one connection for its reads and writes (and opens a second to probe buckets
    during ``add`` and one per listing); use it from one thread at a time.
    """

    def __init__(self, conn: Connection, scope: Scope, row: catalog.CollectionRow, url: str) -> None:
        """Use ``Index.create`` or ``Index.open``."""
        self._conn, self._url = conn, url
        # The collection's handle: its writer and readers are given it, and a rebuild changes the
        # parameters there, so that nothing reads them through the writer.
        self._collection = Collection.of(url, scope, row)
        self._scope = self._collection.scope
        self.name = row.name
        self.schema = scope.schema
        self._connections = self._collection.connections
        # Made on the first write: a command that only reads (query, check, listings) never
        # imports the ingest pipeline.
        self._writing: Writer | None = None
        if row.unicode_version != unicodedata.unidata_version:
            warnings.warn(
                f"collection {row.name!r} was built with Unicode {row.unicode_version}, this Python has "
                f"{unicodedata.unidata_version}: a few newly assigned characters may normalise differently; "
                "rebuild it to be exact",
                UnicodeVersionWarning,
                stacklevel=3,
            )

    @property
    def _writer(self) -> Writer:
        """The collection's writer, made (and the ingest pipeline imported) on first use."""
        if self._writing is None:
            from neardup.ingest.writer import Writer

            self._writing = Writer(self._collection)
        return self._writing

    @property
    def _sketch(self) -> Sketcher:
        """The sketcher of the collection's parameters as they are now (a rebuild changes them)."""
        return self._collection.sketcher

    @property
    def config(self) -> IndexConfig:
        """The collection's threshold, text storage and parameters."""
        return self._collection.config

    @property
    def params(self) -> Params:
        """Every choice that changes signatures or bucket keys."""
        return self.config.params

    @property
    def threshold(self) -> float:
        """Pairs at or above this similarity are stored."""
        return self.config.threshold

    @property
    def keep(self) -> str:
        """Which document of a cluster is its representative (``first``, ``longest``, ``id``,
        ``meta:FIELD`` or ``meta:FIELD:desc``), as stored now (another process may change it)."""
        with translated(f"reading what {self.name!r} keeps"), transaction(self._conn):
            row = catalog.get(self._scope, self.name)
        if row is None:
            raise CollectionNotFoundError(f"collection {self.name!r} was dropped")
        return row.keep

    @property
    def distributed(self) -> bool:
        """Whether the collection's tables are Citus tables (docs/distributed.md)."""
        return self._scope.distributed

    @property
    def store_text(self) -> bool:
        """Whether texts are stored (and pairs verified exactly)."""
        return self.config.store_text

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        url: str,
        name: str = "default",
        threshold: float = DEFAULT_THRESHOLD,
        *,
        num_perm: int = DEFAULT_NUM_PERM,
        bands: int | None = None,
        rows: int | None = None,
        recall_at_threshold: float = DEFAULT_RECALL_AT_THRESHOLD,
        scheme: Scheme = DEFAULT_SCHEME,
        seed: int = DEFAULT_SEED,
        shingle: ShingleKind = "char",
        k: int = 5,
        unicode_form: UnicodeForm = "NFKC",
        case: CaseMode = "fold",
        collapse_whitespace: bool = True,
        store_text: bool = True,
        keep: str = DEFAULT_KEEP,
        neighbours: bool = False,
        neighbour_floor: float = DEFAULT_NEIGHBOUR_FLOOR,
        dense_cluster_size: int = DEFAULT_DENSE_CLUSTER_SIZE,
        schema: str = DEFAULT_SCHEMA,
        exist_ok: bool = False,
        distributed: bool | None = None,
        shards: int | None = None,
        changes_feed: bool | None = None,
        changes_retention_hours: int | None = None,
    ) -> Index:
        """Create a collection (migrating the schema first when it is missing or behind).

        Bands and rows are tuned for ``threshold`` unless both are given, so that the expected
        recall of the pairs just above it reaches ``recall_at_threshold``. ``neighbours`` keeps
        text fingerprints for ``query``'s top-k (down to ``neighbour_floor``) and containment
        answers. With ``exist_ok`` an existing collection with the same parameters is opened;
        different ones are refused. A cluster of ``dense_cluster_size`` contents or more is dense:
        it stores a verified subset of its pairs that connects it, not every pair
        (``cluster_pairs`` gives them all on demand).
        ``distributed=True`` makes its tables Citus tables (``shards`` per table), distributing the
        schema if it has no collection yet; None follows the schema (a collection in a distributed
        schema is distributed), False refuses a distributed schema (docs/distributed.md).
        ``changes_feed=True`` numbers every write in a changes feed (``changes``), keeping each
        change ``changes_retention_hours`` (None: every one).
        """
        from neardup.storage import changes

        check_collection_name(name)
        hours = validate.retention_hours(changes_retention_hours, changes_feed)
        feed = bool(changes_feed), changes.retention(hours)
        shards = _shards(shards, distributed)
        config = IndexConfig.new(
            threshold,
            bands=bands,
            rows=rows,
            store_text=store_text,
            num_perm=num_perm,
            recall_at_threshold=recall_at_threshold,
            scheme=scheme,
            seed=seed,
            shingle=shingle,
            k=k,
            unicode_form=unicode_form,
            case=case,
            collapse_whitespace=collapse_whitespace,
            neighbours=neighbours,
            neighbour_floor=neighbour_floor,
            dense_cluster_size=dense_cluster_size,
        )
        if not migrate.is_head(migrate.current_revision(url, schema)):
            migrate.upgrade(url, schema)
        conn = connect(url)
        try:
            scope = Scope(conn, schema)
            row = _created(scope, url, name, config, distributed, shards, exist_ok, keep, feed)
            return cls(conn, scope, row, url)
        except BaseException:
            conn.close()
            raise

    @classmethod
    def open(
        cls, url: str, name: str = "default", *, schema: str = DEFAULT_SCHEMA, params: Params | None = None
    ) -> Index:
        """Open an existing collection; with ``params``, refuse if the stored ones differ."""
        check_collection_name(name)
        conn, scope, row = open_collection(url, schema, name)
        try:
            if params is not None:
                Params.from_dict(row.params).require_same(params)
            return cls(conn, scope, row, url)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the database connections."""
        self._collection.close()
        self._conn.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Index(name={self.name!r}, threshold={self.threshold}, params={self.params})"

    # -- writing -----------------------------------------------------------------------------

    def add(
        self,
        records: Iterable[Record] | Table,
        *,
        id: str = "id",
        text: str = "text",
        meta: Sequence[str] | None = None,
        batch_size: int | None = DEFAULT_BATCH_SIZE,
        progress: Callable[[AddResult], None] | None = None,
        clock: StageClock = NO_CLOCK,
        jobs: int = 1,
        concurrent: bool = False,
    ) -> AddResult:
        """Add or replace documents, ``batch_size`` per transaction (from 8,192 on, the first three
        batches are an eighth, a quarter and a half of it, so that writing starts early); each
        batch's pairs with everything stored before it and with itself are verified and stored
        before it commits. ``batch_size=None`` writes every record in one transaction, whatever
        their number: all are stored or none (the service adds a request so); memory then follows
        the whole call, so keep it for inputs of bounded size.

        A record is ``(id, text)``, ``(id, text, meta)`` or a dict with ``id``, ``text`` and optional
        ``meta``. A record whose id is stored with the same text and metadata changes nothing; with
        another text it replaces the stored one. A bad record, or an id repeated anywhere in
        ``records``, stops the call with InputError naming its position; the batches committed
        before the one holding it stay. ``progress`` is called with the running total after each
        committed batch; ``clock`` (a ``StageClock``), when given, gets the time of each stage.

        A table may stand for the records: a ``pyarrow.Table``, ``RecordBatch`` or
        ``RecordBatchReader``, or a pandas ``DataFrame`` (``pip install 'neardup[arrow]'``), read a
        batch at a time; ``id`` and ``text`` name its columns (an integer id becomes its text),
        ``meta`` those kept as metadata (None: every other one; ``[]``: none), and a bad row is
        named by its position (``row 7``).

        ``jobs`` > 1 splits the records by id over that many writer processes, each with its own
        connection (``ingest.parallel``); the end state is the same as with one. ``concurrent``:
        other writers add to the collection meanwhile (as those processes do), so each batch
        probes and verifies against what is committed and writes its new contents and signatures
        before its turn at the collection's lock; in its turn it verifies only the pairs with what
        they committed since, and writes its contents again if one of its new texts was stored
        meanwhile (docs/distributed.md, "Writers in parallel").
        """
        jobs = validate.jobs(jobs)
        records = rows_of(records, id, text, meta)
        if jobs > 1:
            if batch_size is None:
                raise ParamsError("one transaction is one writer: give batch_size=None with jobs=1")
            if clock is not NO_CLOCK:
                raise ParamsError("a stage clock times one writer: give it with jobs=1")
            from neardup.ingest import parallel

            return parallel.add(self._url, self.schema, self.name, records, jobs, batch_size, progress)
        return self._writer.add(records, batch_size, progress, clock, concurrent=concurrent)

    def remove(self, ids: Iterable[str]) -> int:
        """Remove documents by id, with their pairs; returns how many were found. Unknown ids are ignored."""
        return self._writer.remove(ids)

    def sync(
        self,
        records: Iterable[Record],
        removed: Iterable[str],
        *,
        also: Callable[[Connection], None] | None = None,
    ) -> tuple[AddResult, int]:
        """Add or replace ``records`` and remove the documents ``removed`` in one transaction: all
        or nothing, memory following the records. ``also``, when given, runs on the index's
        connection inside that transaction before it commits (a follower deletes the changes it
        applied so). Returns what was added and how many documents were removed."""
        return self._writer.sync(records, removed, also)

    def rebuild(
        self,
        threshold: float | None = None,
        *,
        bands: int | None = None,
        rows: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        **fields: object,
    ) -> None:
        """Change parameters and recompute buckets, pairs and clusters, in one transaction.

        When only the threshold, bands or rows change, buckets come from the stored signatures
        (no text is re-read). Any other change (num_perm, shingles, normalisation, seed, scheme)
        re-sketches every stored text, so it needs a collection that stores text. Bands and rows
        are re-tuned for the threshold unless both are given: to reach the recall target in the
        threshold's bin for the collection's own pairs there, once it has stored enough of them
        (``own_pairs.own_density``), else for the tuner's prior.
        """
        from neardup import own_pairs

        density = None
        if bands is None and rows is None:
            with translated(f"reading the pairs of {self.name!r}"), transaction(self._conn):
                target = self.threshold if threshold is None else check_threshold(threshold)
                density = own_pairs.own_density(self._scope, self.config, target, fields)
        changed = self.config.changed(threshold, bands=bands, rows=rows, density=density, **fields)
        self._writer.rebuild(changed, batch_size)

    def set_keep(self, keep: str) -> None:
        """Store which document of each cluster is its representative: ``first`` (the earliest
        inserted; no later document displaces it), ``longest`` (the longest text, or the most
        shingles when texts are not stored), ``id`` (the smallest id, bytewise), ``meta:FIELD`` or
        ``meta:FIELD:desc`` (the smallest or largest value of a metadata field; documents without
        it last). Ties go to the earliest inserted. Nothing is re-sketched or recomputed: listings,
        views, ``dedup`` and the review pages follow the stored policy."""
        self._writer.set_keep(check_keep(keep))

    # -- reading -----------------------------------------------------------------------------

    @overload
    def query(
        self, text: str, min_jaccard: float | None = None, limit: int | None = None, *, k: int | None = None
    ) -> list[tuple[str, float]]: ...

    @overload
    def query(
        self,
        text: str,
        *,
        limit: int | None = None,
        min_containment: float,
        direction: Direction = "contains",
    ) -> list[Contained]: ...

    def query(
        self,
        text: str,
        min_jaccard: float | None = None,
        limit: int | None = None,
        *,
        k: int | None = None,
        min_containment: float | None = None,
        direction: Direction = "contains",
    ) -> list[tuple[str, float]] | list[Contained]:
        """Stored documents similar to ``text``, best first: (id, similarity).

        Similarity is the exact Jaccard of the shingle sets when texts are stored, else the
        signature estimate (approximate, standard error sqrt(J(1-J)/num_perm)). Only documents
        sharing a bucket are considered, so below the collection's threshold recall falls off
        along the S-curve, and matches far below it are never found. With ``limit``, at most
        max(200, 10 x ``limit``) of the text's candidates are verified, any of them: a text of a
        dense cluster shares its buckets with thousands of near-copies (approximate only there;
        ``clusters_of`` names the cluster of an answer).

        A collection made with ``neighbours=True`` also answers, whatever its threshold: ``k=N``,
        the N stored documents with the highest exact Jaccard at or above its ``neighbour_floor``,
        best first; ``min_containment=C``, the stored documents that contain at least C of the
        text's shingles (``direction="within"``: those the text contains at least C of), as
        ``Contained(id, containment, jaccard)`` with both exact, largest share first. Both find
        their candidates by text fingerprints (``neighbours``): approximate only in what they find.
        """
        with translated(f"querying {self.name!r}"):
            if k is None and min_containment is None:
                return similar(self._scope, self.config, self._sketch, text, min_jaccard, limit)
            return self._neighbours(text, min_jaccard, limit, k, min_containment, direction)

    def _neighbours(
        self,
        text: str,
        min_jaccard: float | None,
        limit: int | None,
        k: int | None,
        containment: float | None,
        way: Direction,
        dry: bool = False,
    ) -> list[tuple[str, float]] | list[Contained]:
        if k is not None and containment is not None:
            raise ParamsError("ask for the top k or for a min_containment, not both at once")
        if min_jaccard is not None:
            raise ParamsError("min_jaccard goes with a similarity query, not with top-k or containment")
        if limit is not None and k is not None:
            raise ParamsError("limit goes with a similarity or containment query, not with top-k")
        limit = validate.limit(limit)
        top = neighbours.top_k(k) if k is not None else None
        share = neighbours.min_containment(containment) if containment is not None else None
        way = neighbours.direction(way)
        neighbours.require_neighbours(self.config, self.name)
        if dry:
            return []
        if top is not None:
            return neighbours.nearest(self._scope, self.config, self._sketch, text, top)
        assert share is not None
        found = neighbours.containing(self._scope, self.config, self._sketch, text, share, way)
        return found[:limit] if limit is not None else found

    def check(
        self,
        records: Iterable[Record],
        *,
        min_jaccard: float | None = None,
        limit: int | None = None,
        batch_size: int = CHECK_BATCH_SIZE,
        k: int | None = None,
        min_containment: float | None = None,
        direction: Direction = "contains",
    ) -> Iterator[CheckResult]:
        """For each record, in input order, its id and its stored near-duplicates (id, similarity)
        best first, as ``query`` finds them; stores nothing. Records are taken as ``add`` takes
        them (a bad one raises InputError naming its position), ``batch_size`` per round trip.
        With ``k`` or ``min_containment`` (a collection made with ``neighbours=True``), each
        record's matches are ``query``'s answers to them, asked record by record."""
        batch_size = validate.positive_int(batch_size, "batch_size")
        checked = (to_document(r, f"record {n}") for n, r in enumerate(records))
        if k is not None or min_containment is not None:
            # Checked before the first record is read, as the other options are.
            self._neighbours("", min_jaccard, limit, k, min_containment, direction, dry=True)
            for document in checked:
                with translated(f"checking documents against {self.name!r}"):
                    found = self._neighbours(document.text, min_jaccard, limit, k, min_containment, direction)
                yield CheckResult(document.id, found)  # type: ignore[arg-type]
            return
        with translated(f"checking documents against {self.name!r}"):
            yield from check_all(
                self._scope,
                self.config,
                self._sketch,
                checked,
                min_jaccard,
                limit,
                batch_size,
                self._connections.second,
            )

    def stored(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` that name stored documents."""
        with translated(f"looking up ids in {self.name!r}"), transaction(self._conn):
            return document_rows.stored_ids(self._scope, list(ids))

    def pairs(
        self, min_jaccard: float | None = None, *, cluster: int | None = None
    ) -> Iterator[tuple[str, str, float]]:
        """Every stored near-duplicate pair (id_a < id_b, similarity), copies of one text included;
        with ``cluster``, those of that cluster only.

        Pairs are stored at the collection's threshold; ``min_jaccard`` can only raise it. A
        cluster under ``dense_cluster_size`` contents stores every pair; a dense one a verified
        subset that connects it (``dense_clusters``; ``cluster_pairs`` lists all of its pairs).
        The listing reads one snapshot on a connection of its own, so writes made while it is open
        commit independently of it.
        """
        floor = self.threshold if min_jaccard is None else validate.fraction(min_jaccard, "min_jaccard")
        cluster = None if cluster is None else validate.cluster_id(cluster, "cluster")
        doing = f"listing pairs of {self.name!r}"
        return listings.pairs(self._url, self._scope, floor, doing, cluster)

    def dense_clusters(self) -> list[tuple[int, int, int]]:
        """(cluster id, contents, documents) of each dense cluster, largest first: those whose
        stored pairs are a connecting subset of their pairs."""
        with translated(f"reading the dense clusters of {self.name!r}"), transaction(self._conn):
            return statistics.dense_clusters(self._scope)

    def clusters_of(self, ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """The cluster id of each stored document of ``ids`` and how many contents it holds (a
        document alone is a cluster of one content)."""
        with translated(f"reading the clusters of documents of {self.name!r}"), transaction(self._conn):
            return statistics.clusters_of(self._scope, list(ids))

    def cluster_pairs(
        self, cluster_id: int, min_jaccard: float | None = None
    ) -> Iterator[tuple[str, str, float]]:
        """Every pair of one cluster's documents at or above the threshold (``min_jaccard`` can only
        raise it), as ``pairs`` would list them if every pair were stored: for a dense cluster
        (``dense_cluster_size`` contents or more), which stores only a connecting subset, its
        complete pairs, verified now from the stored texts (or signatures) of its contents. Each
        pair (id_a < id_b, similarity) once, in no particular order, streamed in parts from one
        snapshot on a connection of its own. Quadratic: a cluster of k near-copies has about
        k²/2 pairs, each verified. ClusterNotFoundError if no stored content has that cluster id."""
        floor = self.threshold if min_jaccard is None else validate.fraction(min_jaccard, "min_jaccard")
        cluster_id = validate.cluster_id(cluster_id)
        doing = f"listing the pairs of cluster {cluster_id} of {self.name!r}"
        return complete.cluster_pairs(
            self._url, self._scope, self.name, self.config, self._sketch, cluster_id, floor, doing
        )

    def clusters(self) -> Iterator[Cluster]:
        """Connected components of the pairs (copies of one text included), two or more ids each:
        each a ``Cluster``, its ids sorted, with its lasting ``id`` and its ``representative``
        (the ``keep`` policy's choice); clusters by id, the oldest first. Read like
        ``pairs``, on a connection of its own."""
        rows = listings.clusters(self._url, self._scope, f"listing clusters of {self.name!r}")
        for cluster_id, group in itertools.groupby(rows, key=lambda r: r[0]):
            members = list(group)
            kept = next(r[1] for r in members if r[2])
            yield Cluster((r[1] for r in members), int(cluster_id), kept, bool(members[0][3]))

    def changes(self, since: int = 0, *, limit: int = 1000, timeout: float = 0.0) -> ChangesPage:
        """Up to ``limit`` changes numbered after ``since``, in commit order, and the ``since`` to
        ask with next; ``timeout`` > 0 waits that long for a first one (``Database.changes``)."""
        from neardup.storage import changes

        request = validate.feed_request(since, limit, timeout)
        return changes.read(self._url, self._scope, self.name, *request)

    def stats(self, largest: int = 5) -> Stats:
        """Counts of documents, contents, pairs and clusters, size on disk and the fullest buckets."""
        from neardup import own_pairs
        from neardup.sampled_buckets import sampled_buckets
        from neardup.storage import changes

        scope, banding = self._scope, self.config.banding()
        with translated(f"reading statistics of {self.name!r}"), transaction(self._conn):
            row = catalog.get(scope, self.name)
            if row is None:
                raise CollectionNotFoundError(f"collection {self.name!r} was dropped")
            counts, counted = statistics.collection_counts(scope, row.next_content_id)
            dense = (
                statistics.sampled_dense_clusters(scope, row.next_content_id, self.params.dense_cluster_size)
                if counted == statistics.ESTIMATED
                else statistics.dense_clusters(scope)
            )
            if counted == statistics.ESTIMATED:
                bucket_rows, largest_buckets = sampled_buckets(
                    scope, row.next_content_id, self._sketch, largest
                )
            else:
                bucket_rows = statistics.bucket_rows(scope)
                largest_buckets = statistics.largest_buckets(scope, largest)
            sizes = statistics.sizes(scope)
            kept, kept_bytes = changes.kept(scope)
            if kept:  # a collection without the feed has no entry
                sizes["changes"] = (kept_bytes, 0)
            retention = row.change_retention
            return Stats(
                name=self.name,
                **counts,
                counted=counted,
                bucket_rows=bucket_rows,
                bytes_on_disk=sum(rows + indexes for rows, indexes in sizes.values()),
                largest_buckets=largest_buckets,
                params=self.params,
                threshold=self.threshold,
                store_text=self.store_text,
                expected_fp_rate=banding.false_positive_rate,
                expected_fn_rate=banding.false_negative_rate,
                candidate_probability_at_threshold=banding.candidate_probability_at_threshold,
                expected_threshold_bin_recall=banding.threshold_bin_recall,
                bytes_by_table=sizes,
                **_neighbour_size(scope, self.params),
                dense_clusters=len(dense),
                dense_contents=sum(n for _, n, _ in dense),
                dense_documents=sum(m for _, _, m in dense),
                recall_check=own_pairs.recall_check(scope, self.config),
                keep=row.keep,
                changes_feed=row.change_feed,
                changes_retention_hours=None if retention is None else retention.total_seconds() / 3600,
            )

    def evaluate(self, sample: int = 1000, *, seed: int = 0, floor: float | None = None) -> Evaluation:
        """Recall and precision of the stored pairs against exact truth for a sample of contents.

        ``sample`` contents with at least one shingle are drawn with ``seed`` (the same sample for
        the same collection). Each is compared exactly with every stored content (a set-similarity
        join over the shingle sets this collection verifies with), keeping pairs with Jaccard >=
        ``floor`` (default: half the threshold) for the candidate curve. Recall and precision are
        estimates for the whole collection from the sample, recall with a bootstrap interval over
        the sampled contents; the truth of each sampled content and the histogram of stored pairs
        are exact. Documents with the same normalised text are one content, so their pairs are not
        counted. Reads one snapshot; needs stored texts.
        """
        from neardup.evaluation_sample import evaluate

        with translated(f"evaluating {self.name!r}"):
            return evaluate(self._scope, self.name, self.config, self._sketch, sample, seed, floor)


__all__ = [
    "AddResult",
    "CheckResult",
    "Cluster",
    "Contained",
    "Index",
    "NeardupError",
    "Stats",
    "UnicodeVersionWarning",
]
