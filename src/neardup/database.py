"""The public Database: what is not one collection (the schema, the list of collections, tokens,
labels and the review pages' reads), beside the one-collection ``Index``.

    with Database("postgresql://app@db/archive") as db:
        for c in db.collections():
            print(c.name, c.documents, c.pairs, c.clusters)
        with db.open("news") as index:
            print(index.query("Storms cut power to 40,000 homes"))

A Database borrows connections from a small pool of its own, one per call, so one Database may be
shared by many threads (the service does). The command line and the service reach the database
through this module and ``Index`` only; the SQL stays in ``neardup.storage``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neardup import validate
from neardup.config import DEFAULT_THRESHOLD
from neardup.core.advice import DEFAULT_TARGET, Advice, advise
from neardup.core.params import Params
from neardup.credentials import ACCESS_LEVELS, digest, new_secret, shown_prefix
from neardup.errors import CollectionNotFoundError, ParamsError
from neardup.storage import backup, catalog, changes, keyset_pages, labels, migrate, statistics, tokens
from neardup.storage.changes import Change, ChangesPage
from neardup.storage.connect import redacted, transaction, translated
from neardup.storage.keyset_pages import ClusterRow, DocumentRow, PairQuery, PairRow
from neardup.storage.labels import LABELS, LabelRow
from neardup.storage.listener import ChangeListener
from neardup.storage.names import DEFAULT_SCHEMA, check_collection_name, check_schema_name
from neardup.storage.pool import ConnectionPool
from neardup.storage.scope import Scope
from neardup.storage.tokens import TokenRow

if TYPE_CHECKING:
    from neardup.index import Index


@dataclass(frozen=True)
class CollectionInfo:
    """A collection of the schema: its settings and, when counted, its documents, stored pairs
    (``pairs``: pairs of different texts, as ``Index.stats`` counts them; the command line calls
    them text pairs), clusters and pairs of documents."""

    name: str
    threshold: float
    store_text: bool
    distributed: bool
    params: dict[str, Any]
    documents: int | None = None
    pairs: int | None = None
    clusters: int | None = None
    document_pairs: int | None = None
    """Pairs of documents, as ``Index.pairs`` lists them (``Stats.document_pairs``)."""
    counted: str | None = None
    """How the counts were found, when counted: ``"exact"`` or ``"estimated"`` (``Stats.counted``)."""


@dataclass(frozen=True)
class DowngradePlan:
    """What a downgrade of the schema would undo, before it runs: the revision it is at, the
    migrations undone (newest first: revision, what it added, which goes with its data), and, for
    a downgrade to ``base``, which drops every table, each collection with its documents."""

    current: str | None
    target: str
    steps: list[tuple[str, str]]
    dropped: list[tuple[str, int]]


def _info(
    row: catalog.CollectionRow, counts: dict[str, int] | None, estimated: bool = False
) -> CollectionInfo:
    found = counts or {}
    return CollectionInfo(
        row.name,
        row.threshold,
        row.store_text,
        row.distributed,
        row.params,
        found.get("documents"),
        found.get("pairs"),
        found.get("clusters"),
        found.get("document_pairs"),
        None if counts is None else statistics.ESTIMATED if estimated else statistics.EXACT,
    )


class Database:
    """A neardup schema in one PostgreSQL database: its collections, tokens and labels.

    Nothing is opened until the first call; ``close`` (or the ``with`` block's end) closes the
    pooled connections.
    """

    def __init__(self, url: str, schema: str = DEFAULT_SCHEMA, *, pool_size: int = 8) -> None:
        """``pool_size``: idle connections kept open for the next call."""
        self.url, self.schema = url, check_schema_name(schema)
        self._pool = ConnectionPool(url, schema, pool_size)
        self._listener: ChangeListener | None = None
        self._listener_lock = threading.Lock()
        self.tokens = Tokens(self)
        self.labels = Labels(self)

    @property
    def url_redacted(self) -> str:
        """The URL with any password hidden, for messages."""
        return redacted(self.url)

    def close(self) -> None:
        """Close the pooled connections (and the one that listens for changes, if open)."""
        if self._listener is not None:
            self._listener.close()
        self._pool.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.url_redacted!r}, schema={self.schema!r})"

    @contextmanager
    def _scope(self) -> Iterator[Scope]:
        with self._pool.scope() as scope:
            yield scope

    def ping(self) -> None:
        """Run ``SELECT 1``; DatabaseConnectionError when the database does not answer."""
        self._pool.ping()

    def idle(self) -> int:
        """How many pooled connections are open between calls."""
        return self._pool.idle()

    # -- the schema ------------------------------------------------------------------------------

    def revision(self) -> str | None:
        """The revision the schema is at, or None when it was never migrated."""
        with self._scope() as scope:
            return migrate.revision_on(scope.conn, self.schema)

    @staticmethod
    def head_revision() -> str:
        """The newest revision this version of neardup knows."""
        return migrate.head_revision()

    def upgrade(self, revision: str = "head") -> None:
        """Create the schema or bring it up to ``revision`` (default: the newest), in one
        transaction; a schema already at the newest is left alone without starting a migration."""
        if revision == "head" and migrate.is_head(self.revision()):
            return
        migrate.upgrade(self.url, self.schema, revision)

    def downgrade(self, revision: str) -> None:
        """Take the schema down to ``revision``; ``base`` drops every neardup table (and its data)."""
        migrate.downgrade(self.url, self.schema, revision)

    def backup(self, out: str | Path) -> None:
        """Write the whole schema (every collection, token, label, change and queued follow) to
        ``out`` with ``pg_dump``, in its custom format: one consistent snapshot, no writer blocked."""
        with self._scope() as scope, translated(f"backing up schema {self.schema!r}"):
            backup.dump(self.url, scope.conn, self.schema, Path(out))

    def restore(self, archive: str | Path, *, replace: bool = False) -> None:
        """Restore the schema from a ``backup`` with ``pg_restore``, in one transaction; SchemaError
        when it exists here already, unless ``replace`` (the old one is dropped once the restore
        has committed). A backup of an older neardup is brought up to date by ``upgrade``."""
        with self._scope() as scope, translated(f"restoring schema {self.schema!r}"):
            backup.restore(self.url, scope.conn, self.schema, Path(archive), replace=replace)

    def downgrade_plan(self, revision: str) -> DowngradePlan:
        """What ``downgrade(revision)`` would undo and, to ``base``, drop (``DowngradePlan``);
        ParamsError when ``revision`` is no revision below the schema's."""
        with self._scope() as scope:
            current = migrate.revision_on(scope.conn, self.schema)
            dropped = migrate.documents_by_collection(scope.conn, self.schema) if revision == "base" else []
        target, steps = migrate.downgrade_steps(current, revision)
        return DowngradePlan(current, target, steps, dropped)

    def require_current(self) -> None:
        """SchemaError unless the schema is at the revision this neardup needs."""
        with self._scope() as scope:
            migrate.require_head(scope.conn, self.schema)

    # -- collections -----------------------------------------------------------------------------

    def collections(self, *, counts: bool = True) -> list[CollectionInfo]:
        """Every collection of the schema, by name; with ``counts``, each with its numbers of
        documents, pairs and clusters (a count reads each collection's rows: without it, the list
        costs one small query)."""
        with self._scope() as scope, translated("listing collections"), transaction(scope.conn):
            rows = catalog.all_rows(scope)
            if not counts:
                return [_info(r, None) for r in rows]
            counted, guessed = statistics.listed_counts(
                scope, {r.collection_id: r.next_content_id for r in rows}, any(r.distributed for r in rows)
            )
            return [_info(r, counted[r.collection_id], r.collection_id in guessed) for r in rows]

    def info(self, name: str) -> CollectionInfo:
        """The collection called ``name`` with its counts; CollectionNotFoundError if there is none."""
        with self._scope() as scope, translated(f"reading collection {name!r}"), transaction(scope.conn):
            row = self._row(scope, name)
            mine = scope.with_collection(row.collection_id, row.distributed)
            counts, counted = statistics.collection_counts(mine, row.next_content_id)
            return _info(row, counts, counted == statistics.ESTIMATED)

    def _row(self, scope: Scope, name: str) -> catalog.CollectionRow:
        """The catalog row of ``name`` (a checked name), or CollectionNotFoundError: the one place
        a collection name becomes a collection for the reads below."""
        row = catalog.get(scope, check_collection_name(name))
        if row is None:
            raise CollectionNotFoundError(f"no collection named {name!r} in schema {self.schema!r}")
        return row

    def create(self, name: str, threshold: float = DEFAULT_THRESHOLD, **params: Any) -> Index:
        """Create a collection and return it open: ``params`` are those of ``Index.create``
        (``config.CREATE_PARAMETERS``, and ``exist_ok``); the schema is migrated if needed."""
        from neardup.index import Index

        return Index.create(self.url, name, threshold, schema=self.schema, **params)

    def open(self, name: str) -> Index:
        """Open an existing collection (CollectionNotFoundError if there is none)."""
        from neardup.index import Index

        return Index.open(self.url, name, schema=self.schema)

    def drop(self, name: str) -> bool:
        """Drop a collection with its documents, pairs and labels, in one transaction; False when
        there is none. Its writers finish first (it takes their lock); an Index still open on it
        fails on its next call."""
        check_collection_name(name)
        with (
            self._scope() as scope,
            translated(f"dropping collection {name!r}"),
            transaction(scope.conn),
        ):
            catalog.lock_name(scope, name)
            found = catalog.get(scope, name)
            if found is None:
                return False
            # Locked as its writers lock it (a distributed collection's lock is not its row's).
            mine = scope.with_collection(found.collection_id, found.distributed)
            row = catalog.get(mine, name, lock=True)
            if row is None:
                return False
            keyset_pages.delete_collection(scope.with_collection(row.collection_id, row.distributed))
        return True

    # -- the changes feed --------------------------------------------------------------------------

    def changes(self, name: str, since: int = 0, *, limit: int = 1000, timeout: float = 0.0) -> ChangesPage:
        """Up to ``limit`` changes of the collection numbered after ``since``, in the order their
        writes committed, and the ``since`` to ask with next; with ``timeout`` > 0, waits up to that
        many seconds for a first one. ChangesGoneError when some after ``since`` are no longer
        kept, ChangesFeedError when the collection keeps no feed."""
        request = validate.feed_request(since, limit, timeout)
        with self._collection_scope(name) as scope:
            return changes.read(self.url, scope, name, *request)

    def on_change(self, name: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` (on another thread, so it must only set a flag) after each commit
        that records changes of collection ``name``, and after the connection that hears them was
        lost and made again, until the function returned is called. One connection of this
        Database hears them for every callback. Returns once it listens: a commit after the call
        is heard. CollectionNotFoundError if there is no such collection."""
        with self._scope() as scope, translated(f"reading collection {name!r}"):
            row = self._row(scope, name)
        with self._listener_lock:
            if self._listener is None:
                self._listener = ChangeListener(self.url, self.schema)
            listener = self._listener
        return listener.subscribe(row.collection_id, callback)

    def listening(self) -> tuple[int, bool]:
        """How many ``on_change`` callbacks are registered, and whether their connection is up
        (False also before the first)."""
        listener = self._listener
        return (0, False) if listener is None else (listener.waiting(), listener.connected)

    def changes_feed(self, name: str, on: bool, retention_hours: int | None = None) -> None:
        """Turn the collection's changes feed on, keeping each change ``retention_hours`` (None:
        every one), or off, deleting its changes; under the collection's writer lock, so every
        write after this one is numbered (or none)."""
        retention = changes.retention(validate.retention_hours(retention_hours, on))
        with (
            self._scope() as scope,
            translated(f"turning the changes feed of {name!r} {'on' if on else 'off'}"),
            transaction(scope.conn),
        ):
            row = self._row(scope, name)
            mine = scope.with_collection(row.collection_id, row.distributed)
            catalog.get(mine, name, lock=True)
            changes.set_feed(mine, on, retention)

    # -- reads of one collection for the review pages ------------------------------------------------

    def review(self, collection: str) -> Review:
        """The review pages' reads of one collection (CollectionNotFoundError if there is none)."""
        with self._scope() as scope, translated(f"reading collection {collection!r}"):
            row = self._row(scope, collection)
        return Review(self, row.name, row.collection_id, row.distributed, row.threshold)

    def review_counts(self, names: list[str]) -> dict[str, dict[str, int]]:
        """``Review.counts`` of each of the collections ``names``, read together: each of the few
        statements reads the schema's tables once for all of them (CollectionNotFoundError if one
        is missing)."""
        with self._scope() as scope, translated("counting collections for review"):
            rows = [self._row(scope, name) for name in names]
            counted = keyset_pages.review_counts_of(
                scope, {r.collection_id: r.next_content_id for r in rows}, any(r.distributed for r in rows)
            )
        return {r.name: counted[r.collection_id] for r in rows}

    @contextmanager
    def _collection_scope(self, name: str) -> Iterator[Scope]:
        """A pooled scope on the collection called ``name`` (CollectionNotFoundError if none)."""
        with self._scope() as scope:
            with translated(f"reading collection {name!r}"):
                row = self._row(scope, name)
            yield scope.with_collection(row.collection_id, row.distributed)


class Review:
    """Reads of one collection for pages of a listing, a document or a pair. Pages are keyed (each
    starts after the last key of the one before), so a page costs the same wherever it is."""

    def __init__(
        self, db: Database, name: str, collection_id: int, distributed: bool, threshold: float
    ) -> None:
        """Use ``Database.review``."""
        self._db, self._id, self._distributed = db, collection_id, distributed
        self.name, self.threshold = name, threshold

    @contextmanager
    def _scope(self) -> Iterator[Scope]:
        with self._db._scope() as scope:
            yield scope.with_collection(self._id, self._distributed)

    def pairs_page(
        self, min_similarity: float | None, after: tuple[str, str] | None, limit: int
    ) -> list[tuple[str, str, float, str]]:
        """Up to ``limit`` pairs (id_a, id_b, similarity, method) at or above ``min_similarity``
        (None: the threshold), by (id_a, id_b), after the key ``after``."""
        floor = self.threshold if min_similarity is None else min_similarity
        with self._scope() as scope:
            return keyset_pages.pairs_page(scope, floor, after, limit)

    def clusters_page(
        self, after: str | None, limit: int, ids_per_cluster: int = 100_000
    ) -> list[ClusterRow]:
        """Up to ``limit`` clusters by representative, after the representative ``after``."""
        with self._scope() as scope:
            return keyset_pages.clusters_page(scope, after, limit, ids_per_cluster)

    def largest_clusters(
        self, after: tuple[int, str] | None, limit: int, ids_per_cluster: int = 5
    ) -> list[ClusterRow]:
        """Up to ``limit`` clusters, largest first, after the key (size, representative) ``after``."""
        with self._scope() as scope:
            return keyset_pages.largest_clusters(scope, after, limit, ids_per_cluster)

    def cluster_members(self, cluster: int, limit: int) -> list[tuple[str, dict[str, Any] | None]]:
        """Up to ``limit`` documents (id, meta) of one cluster, by id."""
        with self._scope() as scope:
            return keyset_pages.cluster_members(scope, cluster, limit)

    def dense_size(self, cluster: int) -> int | None:
        """The distinct texts of a dense cluster (its stored pairs a connecting subset), else None."""
        with self._scope() as scope:
            return keyset_pages.dense_size(scope, cluster)

    def cluster_representative(self, cluster: int) -> str | None:
        """The document the keep policy keeps of one cluster (None: no such cluster)."""
        with self._scope() as scope:
            return keyset_pages.cluster_representative(scope, cluster)

    def openings(self, ids: list[str], chars: int) -> dict[str, str]:
        """The first ``chars`` characters of each document's stored text, by id."""
        with self._scope() as scope:
            return keyset_pages.openings(scope, ids, chars)

    def cluster_pairs(self, cluster: int, limit: int) -> list[tuple[str, str, float, str]]:
        """Up to ``limit`` pairs within one cluster, most similar first."""
        with self._scope() as scope:
            return keyset_pages.cluster_pairs(scope, cluster, limit)

    def document(self, doc_id: str) -> DocumentRow | None:
        """One document, or None."""
        with self._scope() as scope:
            return keyset_pages.document(scope, doc_id)

    def document_pairs(self, doc_id: str) -> list[tuple[str, float, str]]:
        """The document's near-duplicates (other id, similarity, method), most similar first."""
        with self._scope() as scope:
            return keyset_pages.document_pairs(scope, doc_id)

    def pair(self, id_a: str, id_b: str) -> tuple[float, str] | None:
        """The stored similarity and method of two documents, or None when they are no stored pair."""
        with self._scope() as scope:
            return keyset_pages.pair(scope, id_a, id_b)

    # -- the review loop ---------------------------------------------------------------------------

    def params(self) -> Params:
        """The collection's stored parameters (its shingling and normalisation among them)."""
        with self._db._scope() as scope, translated(f"reading collection {self.name!r}"):
            return Params.from_dict(self._db._row(scope, self.name).params)

    def pair_rows(self, query: PairQuery, limit: int) -> list[PairRow]:
        """Up to ``limit`` pairs of documents as ``query`` asks: ordered by similarity or by
        distance from the threshold (the review queue), filtered by label and similarity."""
        with self._scope() as scope:
            return keyset_pages.pair_rows(scope, self.threshold, query, limit)

    def queue_counts(self, key: tuple[float, str, str] | None) -> tuple[int, int]:
        """How many unlabelled pairs come before ``key`` in the review queue (0 for None), and how
        many unlabelled pairs there are."""
        with self._scope() as scope:
            return keyset_pages.queue_counts(scope, self.threshold, key)

    def queue(self, query: PairQuery, fallback: PairQuery | None = None) -> tuple[PairRow | None, int, int]:
        """The review queue at one pair: the first pair ``query`` asks for (else ``fallback``'s
        first), how many unlabelled pairs come before it, and how many there are; the pairs of
        documents read once (``pair_rows`` then ``queue_counts`` read them twice)."""
        with self._scope() as scope:
            return keyset_pages.queue(scope, self.threshold, query, fallback)

    def counts(self) -> dict[str, int]:
        """documents, clusters, document_pairs (identical copies included), labelled and left
        (document pairs without a label)."""
        with self._scope() as scope:
            return keyset_pages.review_counts(scope)

    def titles(self, ids: list[str]) -> dict[str, str]:
        """A title (metadata ``title`` or ``headline``) or the start of the text, by document id."""
        with self._scope() as scope:
            return keyset_pages.titles(scope, ids)

    def labels_of(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The labels of those of ``pairs`` that have one, keyed (smaller id, larger id)."""
        with self._scope() as scope:
            return labels.labels_of(scope, pairs)


# Digits of the largest token id (a bigint, 2**63 - 1): a longer one names no token, and int() of
# more than 4,300 digits raises.
_TOKEN_ID_DIGITS = 19


class Tokens:
    """API tokens and review sessions (``db.tokens``); only SHA-256 hashes of secrets are stored."""

    def __init__(self, db: Database) -> None:
        """Use ``Database.tokens``."""
        self._db = db

    def create(self, access: str, collection: str | None = None, name: str = "") -> tuple[int, str]:
        """A new token allowed ``access`` (read, write or admin) on ``collection`` (None: every
        one): its id and its secret, which is shown once and never stored. The schema is migrated
        first if it is missing or behind."""
        if access not in ACCESS_LEVELS:
            raise ParamsError(
                f"a token's scope must be one of {', '.join(ACCESS_LEVELS)}, got {access!r:.40}"
            )
        if collection is not None:
            check_collection_name(collection)
        self._db.upgrade()
        secret = new_secret()
        with self._db._scope() as scope:
            token_id = tokens.insert(scope, digest(secret), shown_prefix(secret), access, collection, name)
        return token_id, secret

    def list(self) -> list[TokenRow]:
        """Every token, revoked ones included, oldest first."""
        self._db.require_current()
        with self._db._scope() as scope:
            return tokens.all_tokens(scope)

    def revoke(self, id_or_prefix: str | int) -> int:
        """Revoke a live token, named by its id or by the prefix ``list`` shows, ending its
        sessions; returns its id. ParamsError when that names no live token, or several."""
        self._db.require_current()
        with self._db._scope() as scope:
            which = str(id_or_prefix)
            # ASCII digits only: str.isdigit() is also true of "²", which int() refuses.
            # A prefix is ASCII too (TOKEN_PREFIX and URL-safe base64), and never holds a NUL.
            is_id = which.isascii() and which.isdigit()
            if not is_id and (not which.isascii() or "\x00" in which):
                raise ParamsError(
                    f"{which!r:.40} is neither a token's id (digits 0-9) nor the prefix `token list` shows"
                )
            if is_id and len(which) > _TOKEN_ID_DIGITS:
                raise ParamsError(
                    f"no live token with id {which:.40}... (an id has {_TOKEN_ID_DIGITS} digits at most)"
                )
            ids = [int(which)] if is_id else tokens.find_by_prefix(scope, which)
            if len(ids) != 1:
                raise ParamsError(f"{which!r} names {'no' if not ids else len(ids)} live tokens; give the id")
            if not tokens.revoke(scope, ids[0]):
                raise ParamsError(f"no live token with id {ids[0]}")
        return ids[0]

    def lookup(self, token_hash: bytes) -> TokenRow | None:
        """The live token with this hash (its last use refreshed now and then), else None."""
        with self._db._scope() as scope:
            return tokens.lookup(scope, token_hash)

    def open_session(self, session_hash: bytes, token_id: int, csrf: str, seconds: int) -> None:
        """Store a review session of a token, valid for ``seconds``."""
        with self._db._scope() as scope:
            tokens.open_session(scope, session_hash, token_id, csrf, seconds)

    def session(self, session_hash: bytes) -> tuple[TokenRow, str] | None:
        """The live token of an unexpired session and the session's CSRF value, else None."""
        with self._db._scope() as scope:
            return tokens.session(scope, session_hash)

    def close_session(self, session_hash: bytes) -> None:
        """Forget a session (logging out), and every session that has expired."""
        with self._db._scope() as scope:
            tokens.close_session(scope, session_hash)


class Labels:
    """People's labels of pairs, "duplicate" or "not_duplicate" (``db.labels``)."""

    def __init__(self, db: Database) -> None:
        """Use ``Database.labels``."""
        self._db = db

    def put(
        self,
        collection: str,
        id_a: str,
        id_b: str,
        label: str,
        note: str = "",
        token_id: int | None = None,
        labelled_by: str = "",
    ) -> None:
        """Label the pair (id_a, id_b) of a collection, replacing an earlier label."""
        with self._db._collection_scope(collection) as scope:
            labels.put(scope, id_a, id_b, label, note, token_id, labelled_by)

    def get(self, collection: str, id_a: str, id_b: str) -> LabelRow | None:
        """The label of one pair of a collection, or None."""
        with self._db._collection_scope(collection) as scope:
            return labels.get(scope, id_a, id_b)

    def export(self, collection: str | None = None) -> list[LabelRow]:
        """Every label (of one collection, when named: none when there is no such collection), by
        collection and pair."""
        self._db.require_current()
        with self._db._scope() as scope:
            return labels.export(scope, collection)

    def advise(self, collection: str, target: float = DEFAULT_TARGET) -> Advice:
        """Labelled precision per similarity bin, with Wilson intervals, and the lowest threshold
        (the collection's, or a bin edge above it) whose labelled pairs meet ``target`` with 95%
        confidence, with the labels it rests on (approximate: the labels are a sample)."""
        with self._db._scope() as scope, translated(f"reading collection {collection!r}"):
            row = self._db._row(scope, collection)
            here = scope.with_collection(row.collection_id, row.distributed)
            sims, duplicate = labels.labelled_similarities(here)
        try:
            return advise(sims, duplicate, target, row.threshold)
        except ValueError as exc:
            raise ParamsError(str(exc)) from None

    def verdicts(self, collection: str) -> tuple[int, int]:
        """Of the collection's stored pairs that people labelled: how many were labelled duplicate,
        and how many not (the labels' measure of precision)."""
        with self._db._collection_scope(collection) as scope:
            return labels.verdicts(scope)


__all__ = [
    "DEFAULT_SCHEMA",
    "LABELS",
    "Change",
    "ChangesPage",
    "ClusterRow",
    "CollectionInfo",
    "Database",
    "DocumentRow",
    "DowngradePlan",
    "LabelRow",
    "Labels",
    "PairQuery",
    "PairRow",
    "Review",
    "TokenRow",
    "Tokens",
]
