"""The public Index: joins the numeric core and the PostgreSQL storage.

add(records) -> sketch (core) -> contents, signatures, buckets (storage, binary COPY)
             -> candidate pairs (indexed lookup of the batch's buckets) -> verification (core)
             -> pairs and clusters (storage)
"""

from __future__ import annotations

import itertools
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.config import IndexConfig
from neardup.core.candidates import candidate_pairs
from neardup.core.components import component_labels
from neardup.core.exact_join import SetJoin
from neardup.core.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, Scheme, empty_rows
from neardup.core.normalize import CaseMode, UnicodeForm
from neardup.core.params import Params
from neardup.core.ragged import Ragged
from neardup.core.shingle import ShingleKind
from neardup.core.sketch import Sketch, Sketcher
from neardup.core.verify import exact_jaccard, prefilter_floor, signature_agreement
from neardup.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    InputError,
    NeardupError,
    ParamsError,
    SchemaError,
    TextNotStoredError,
)
from neardup.evaluation import Evaluation, default_floor, similarity_edges, summarise
from neardup.records import Record, to_document
from neardup.records import documents as checked_documents
from neardup.storage import buckets, collections, contents, documents, migrate, pairs
from neardup.storage.connect import Connection, connect, translated
from neardup.storage.names import DEFAULT_SCHEMA, check_collection_name
from neardup.storage.scope import Scope, read_snapshot

# Documents per transaction in add(): large enough that COPY and the set-based statements
# dominate, small enough that a batch's shingles and signatures stay in a few hundred MB.
DEFAULT_BATCH_SIZE = 50_000
# Stored contents read and shingled per step of evaluate()'s scan: few round trips, and a step's
# texts and shingle arrays stay in tens of MB for 1.5 KB texts (the join bounds its own product).
EVALUATION_CHUNK = 2_000
# Similarity methods stored with each pair.
EXACT, ESTIMATE = "exact", "estimate"


class UnicodeVersionWarning(UserWarning):
    """The collection was built under another Unicode database; normalisation may differ slightly."""


@dataclass(frozen=True)
class AddResult:
    """What one ``add`` did: documents added, replaced, unchanged, and new verified pairs."""

    added: int = 0
    replaced: int = 0
    unchanged: int = 0
    new_pairs: int = 0
    empty: int = 0
    """Of the documents added or replaced, those whose text has no shingle (empty or only
    whitespace after normalisation): stored, and never anyone's duplicate."""

    def __add__(self, other: AddResult) -> AddResult:
        return AddResult(
            self.added + other.added,
            self.replaced + other.replaced,
            self.unchanged + other.unchanged,
            self.new_pairs + other.new_pairs,
            self.empty + other.empty,
        )


@dataclass(frozen=True)
class Stats:
    """Counts, sizes and parameters of a collection."""

    name: str
    documents: int
    contents: int
    pairs: int
    identical_pairs: int
    clusters: int
    bucket_rows: int
    bytes_on_disk: int
    largest_buckets: list[tuple[int, int, int]]
    params: Params
    threshold: float
    store_text: bool
    expected_fp_rate: float
    expected_fn_rate: float


@dataclass(frozen=True)
class _Checked:
    ids: list[str]
    texts: list[str]
    metas: list[Any]


def _check_records(batch: Sequence[Record], start: int) -> _Checked:
    """Split records into ids, texts and metadata, refusing bad ones by position and field (an id
    repeated in one ``add`` call is refused before, by ``records.documents``)."""
    ids: list[str] = []
    texts: list[str] = []
    metas: list[Any] = []
    for offset, record in enumerate(batch):
        doc_id, text, meta = to_document(record, f"record {start + offset}")
        ids.append(doc_id)
        texts.append(text)
        metas.append(meta)
    return _Checked(ids, texts, metas)


def _concat(first: Ragged, second: Ragged) -> Ragged:
    values = np.concatenate([np.asarray(first.values, np.uint32), np.asarray(second.values, np.uint32)])
    offsets = np.concatenate([first.offsets, second.offsets[1:] + first.offsets[-1]])
    return Ragged(values, offsets)


# Mixes the band into the bucket key so one sort groups every band at once (odd: a bijection per band).
_BAND_MIX = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as a signed 64-bit integer


def _groups(band: np.ndarray, bucket: np.ndarray, content: np.ndarray) -> Ragged:
    """The members of each shared (band, bucket) as a ragged batch, each group sorted ascending.

    Buckets with a single member are dropped first. Two buckets of different bands could share a
    mixed key with probability ~2**-64 per pair of rows; that would only add candidates, which
    verification then rejects.
    """
    with np.errstate(over="ignore"):
        key = np.asarray(bucket, np.int64) ^ (np.asarray(band, np.int64) * _BAND_MIX)
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    shared = counts[inverse] > 1
    key, content = key[shared], np.asarray(content, np.int64)[shared]
    order = np.lexsort((content, key))
    key, content = key[order], content[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    offsets = np.r_[starts, content.size].astype(np.int64)
    return Ragged(content, offsets)


class Index:
    """A near-duplicate index stored in PostgreSQL: one named collection of documents."""

    def __init__(self, conn: Connection, scope: Scope, row: collections.CollectionRow, url: str) -> None:
        """Use ``Index.create`` or ``Index.open``."""
        self._conn = conn
        self._url = url
        # A second connection, opened on the first add(), reads the stored buckets while the
        # first writes the batch (see _store_batch).
        self._reader: Connection | None = None
        self._scope = scope.with_collection(row.collection_id)
        self.name = row.name
        self.schema = scope.schema
        self.params = Params.from_dict(row.params)
        self.threshold = row.threshold
        self.store_text = row.store_text
        self._sketcher = Sketcher(self.params)
        if row.unicode_version != unicodedata.unidata_version:
            warnings.warn(
                f"collection {row.name!r} was built with Unicode {row.unicode_version}, this Python has "
                f"{unicodedata.unidata_version}: a few newly assigned characters may normalise differently; "
                "rebuild it to be exact",
                UnicodeVersionWarning,
                stacklevel=3,
            )

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        url: str,
        name: str = "default",
        threshold: float = 0.8,
        *,
        num_perm: int = DEFAULT_NUM_PERM,
        bands: int | None = None,
        rows: int | None = None,
        scheme: Scheme = DEFAULT_SCHEME,
        seed: int = DEFAULT_SEED,
        shingle: ShingleKind = "char",
        k: int = 5,
        unicode_form: UnicodeForm = "NFKC",
        case: CaseMode = "fold",
        collapse_whitespace: bool = True,
        store_text: bool = True,
        schema: str = DEFAULT_SCHEMA,
        exist_ok: bool = False,
    ) -> Index:
        """Create a collection (migrating the schema first when it is missing or behind).

        Bands and rows are tuned for ``threshold`` unless both are given. With ``exist_ok`` an
        existing collection with the same parameters is opened; different ones are refused.
        """
        check_collection_name(name)
        config = IndexConfig.new(
            threshold,
            bands=bands,
            rows=rows,
            store_text=store_text,
            num_perm=num_perm,
            scheme=scheme,
            seed=seed,
            shingle=shingle,
            k=k,
            unicode_form=unicode_form,
            case=case,
            collapse_whitespace=collapse_whitespace,
        )
        params, threshold = config.params, config.threshold
        if migrate.current_revision(url, schema) != migrate.head_revision():
            migrate.upgrade(url, schema)
        conn = connect(url)
        try:
            scope = Scope(conn, schema)
            with translated(f"creating collection {name!r}"), conn.transaction():
                # Serialise creators of the same name; the unique key would catch it anyway.
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"neardup:{schema}:{name}",))
                row = collections.get(scope, name)
                if row is None:
                    row = collections.insert(
                        scope,
                        name,
                        params.to_dict(),
                        float(threshold),
                        store_text,
                        unicodedata.unidata_version,
                    )
                elif not exist_ok:
                    raise CollectionExistsError(
                        f"collection {name!r} exists already; open it, or pass exist_ok=True to reuse it"
                    )
                else:
                    Params.from_dict(row.params).require_same(params)
                    if row.threshold != threshold or row.store_text != store_text:
                        raise ParamsError(
                            f"collection {name!r} exists with threshold {row.threshold} and "
                            f"store_text {row.store_text}, not {threshold} and {store_text}"
                        )
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
        conn = connect(url)
        try:
            scope = Scope(conn, schema)
            with translated(f"opening collection {name!r}"):
                _check_revision(conn, scope)
                row = collections.get(scope, name)
            if row is None:
                raise CollectionNotFoundError(f"no collection named {name!r} in schema {schema!r}")
            if params is not None:
                Params.from_dict(row.params).require_same(params)
            return cls(conn, scope, row, url)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the database connections."""
        if self._reader is not None:
            self._reader.close()
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
        records: Iterable[Record],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Callable[[AddResult], None] | None = None,
    ) -> AddResult:
        """Add or replace documents, ``batch_size`` per transaction; each batch's pairs with everything
        stored before it and with itself are verified and stored before it commits.

        A record is ``(id, text)``, ``(id, text, meta)`` or a dict with ``id``, ``text`` and optional
        ``meta``. A record whose id is stored with the same text and metadata changes nothing; with
        another text it replaces the stored one. A bad record stops the call; batches committed
        before it stay. ``progress`` is called with the running total after each committed batch.
        """
        if batch_size < 1:
            raise ParamsError(f"batch_size must be positive, got {batch_size}")
        total = AddResult()
        iterator = checked_documents(records)

        def prepare(start: int) -> tuple[_Checked, Sketch, int] | None:
            """Read, check and sketch the next batch (on a worker thread)."""
            batch = list(itertools.islice(iterator, batch_size))
            if not batch:
                return None
            checked = _check_records(batch, start)
            return checked, self._sketcher.sketch(checked.texts), start

        # Batch i+1 is read, checked and sketched on one worker while batch i is written (the
        # database works on one core, parsing and the numba kernels, which release the GIL, on
        # the other); the second worker probes the stored buckets for batch i.
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="neardup-add") as pool:
            upcoming = pool.submit(prepare, 0)
            # A bad record in batch i+1 surfaces here, after batch i has committed.
            while (ready := upcoming.result()) is not None:
                checked, sketch, start = ready
                upcoming = pool.submit(prepare, start + len(checked.ids))
                total += self._store_batch(checked, sketch, start, pool)
                if progress is not None:
                    progress(total)
        return total

    def _add_batch(self, batch: Sequence[Record], start: int) -> AddResult:
        checked = _check_records(batch, start)
        return self._store_batch(checked, self._sketcher.sketch(checked.texts), start, None)

    def _store_batch(
        self, checked: _Checked, sketch: Sketch, start: int, pool: ThreadPoolExecutor | None
    ) -> AddResult:
        """Write one checked and sketched batch in one transaction. With ``pool`` (not inside an
        outer transaction), the stored buckets are probed on a second connection meanwhile."""
        ids, texts, metas = checked.ids, checked.texts, checked.metas
        scope = self._scope
        end = start + len(ids) - 1
        with translated(f"adding records {start}-{end} to {self.name!r}"), self._conn.transaction():
            row = self._lock()
            matches = documents.match(scope, ids, sketch.content_hashes)
            by_position = {m.position: m for m in matches}
            unchanged = 0
            replaced_docs: list[int] = []
            content_of = np.full(len(ids), -1, dtype=np.int64)
            new_hash_slot: dict[bytes, int] = {}
            first_position: list[int] = []
            for pos in range(len(ids)):
                m = by_position.get(pos)
                if m is not None and m.doc_id is not None:
                    same = m.existing_content is not None and m.existing_content == m.content_id
                    stored_text = m.text if self.store_text else None
                    new_text = texts[pos] if self.store_text else None
                    if same and stored_text == new_text and m.meta == metas[pos]:
                        unchanged += 1
                        continue
                    replaced_docs.append(m.doc_id)
                if m is not None and m.existing_content is not None:
                    content_of[pos] = m.existing_content
                    continue
                slot = new_hash_slot.setdefault(sketch.content_hashes[pos], len(first_position))
                if slot == len(first_position):
                    first_position.append(pos)
                content_of[pos] = row.next_content_id + slot
            lo = row.next_content_id
            new_positions = np.asarray(first_position, dtype=np.int64)
            new_ids = lo + np.arange(new_positions.size, dtype=np.int64)
            # Into an empty collection (or after an interrupted bulk load) the bucket rows go in
            # unindexed and the index is built afterwards, ~2.8x faster than inserting into it;
            # once rows are stored, rebuilding the index costs more than inserting into it.
            bulk = row.next_content_id == 1 or not buckets.has_index(scope)
            bearing = new_positions[sketch.shingle_counts[new_positions] > 0]
            keys = self._sketcher.band_keys(sketch.signatures[bearing])
            probe: Future[tuple[np.ndarray, ...]] | None = None
            if pool is not None and not bulk and keys.shape[0]:
                # The probe runs on the reader connection, in parallel with the inserts below.
                # It sees what was committed before this batch, which is everything stored, since
                # this transaction holds the collection's lock, and nothing of this batch.
                probe = pool.submit(self._probe, keys)
            old_contents = documents.delete(scope, replaced_docs) if replaced_docs else []
            if new_positions.size:
                contents.insert(
                    scope,
                    new_ids,
                    [sketch.content_hashes[p] for p in first_position],
                    sketch.shingle_counts[new_positions],
                    sketch.signatures[new_positions],
                )
            keep = np.flatnonzero(content_of >= 0)
            doc_ids = row.next_doc_id + np.arange(keep.size, dtype=np.int64)
            documents.insert(
                scope,
                doc_ids,
                [ids[i] for i in keep],
                content_of[keep],
                [texts[i] if self.store_text else None for i in keep],
                [metas[i] for i in keep],
            )
            dropped = self._drop_orphans(old_contents) if old_contents else []
            new_pairs = self._pair_new_contents(
                lo, new_ids, new_positions, sketch, keys, bulk, probe, dropped
            )
            collections.advance(scope, lo + new_ids.size, row.next_doc_id + keep.size)
        empty = int(np.count_nonzero(sketch.shingle_counts[keep] == 0))
        return AddResult(keep.size - len(replaced_docs), len(replaced_docs), unchanged, new_pairs, empty)

    def _probe(self, keys: npt.NDArray[np.int64]) -> tuple[np.ndarray, ...]:
        """Stored (band, bucket, content) rows sharing a bucket with ``keys``, read by the reader."""
        if self._reader is None:
            self._reader = connect(self._url)
        reader = self._reader
        with reader.transaction():
            return buckets.members_of(
                Scope(reader, self._scope.schema, self._scope.collection_id), *buckets.distinct_keys(keys)
            )

    def _lock(self) -> collections.CollectionRow:
        """Lock the collection row for this transaction and check it is still ours."""
        row = collections.get(self._scope, self.name, lock=True)
        if row is None or row.collection_id != self._scope.collection_id:
            raise CollectionNotFoundError(
                f"collection {self.name!r} was dropped or rebuilt since it was opened"
            )
        Params.from_dict(row.params).require_same(self.params, "stored", "opened with")
        return row

    def _pair_new_contents(
        self,
        lo: int,
        new_ids: npt.NDArray[np.int64],
        positions: npt.NDArray[np.int64],
        sketch: Sketch,
        keys: npt.NDArray[np.int64],
        bulk: bool,
        probe: Future[tuple[np.ndarray, ...]] | None = None,
        dropped: Sequence[int] = (),
    ) -> int:
        """Bucket the new contents, find and verify their pairs, store them and merge clusters.

        ``keys`` are the band keys of the new contents that have shingles. ``probe``, when given,
        yields the stored members of the new contents' buckets as read by the reader connection;
        contents this transaction ``dropped`` are taken out of them.
        """
        scope = self._scope
        bearing = sketch.shingle_counts[positions] > 0  # empty texts are never anyone's duplicate
        ids = new_ids[bearing]
        if ids.size == 0:
            return 0
        bucket_rows = buckets.flat_rows(ids, keys)
        if bulk:
            buckets.drop_index(scope)
            buckets.insert(scope, *bucket_rows)
            groups = _groups(*buckets.shared_buckets(scope))
            buckets.create_index(scope)
        else:
            # Stored members of the batch's buckets first (few rows), then the batch's own rows,
            # grouped in memory: nothing the batch wrote is read back.
            old: tuple[np.ndarray, ...]
            if probe is None:
                old = buckets.members_of(scope, *buckets.distinct_keys(keys))
                buckets.insert(scope, *bucket_rows)
            else:
                buckets.insert(scope, *bucket_rows)  # while the probe may still run
                old = probe.result()
                if len(dropped):
                    alive = ~np.isin(old[2], np.asarray(dropped, dtype=np.int64))
                    old = tuple(column[alive] for column in old)
            groups = _groups(*(np.concatenate([o, n]) for o, n in zip(old, bucket_rows, strict=True)))
        cand = candidate_pairs(groups, first_new=lo)
        if cand.shape[0] == 0:
            return 0
        local_sketch_row = dict(zip(new_ids.tolist(), positions.tolist(), strict=True))
        left, right, sim = self._verify(cand, lo, local_sketch_row, sketch)
        pairs.insert(scope, left, right, sim, EXACT if self.store_text else ESTIMATE)
        self._merge_clusters(left, right)
        return int(left.size)

    def _verify(
        self, cand: npt.NDArray[np.int64], lo: int, sketch_row: dict[int, int], sketch: Sketch
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keep the candidate pairs whose similarity (exact, or estimated without text) reaches the
        threshold."""
        ids = np.unique(cand)
        old = ids[ids < lo]
        new = ids[ids >= lo]
        old_ids, old_sigs = contents.signatures(self._scope, old.tolist(), self.params.num_perm)
        if old_ids.size != old.size:
            raise SchemaError(f"{old.size - old_ids.size} stored contents have no signature")
        new_rows = np.array([sketch_row[i] for i in new.tolist()], dtype=np.int64)
        # Local row r < len(old) is old[r]; the rest follow new's order; ids = concat(old, new) sorted.
        sigs = np.concatenate([old_sigs, sketch.signatures[new_rows]])
        left = np.searchsorted(ids, cand[:, 0])
        right = np.searchsorted(ids, cand[:, 1])
        agree = signature_agreement(sigs, left, right)
        if not self.store_text:
            ok = agree >= self.threshold
            return cand[ok, 0], cand[ok, 1], agree[ok]
        hopeful = agree >= prefilter_floor(self.threshold, self.params.num_perm)
        cand, left, right = cand[hopeful], left[hopeful], right[hopeful]
        needed_old = np.unique(np.concatenate([left, right]))
        needed_old = needed_old[needed_old < old.size]
        stored_texts = documents.texts(self._scope, old[needed_old].tolist())
        old_sets = self._sketcher.shingles([stored_texts[i] for i in old[needed_old].tolist()])
        # Shingle sets in local row order: old rows that are not needed get empty sets.
        old_lengths = np.zeros(old.size, dtype=np.int64)
        old_lengths[needed_old] = old_sets.lengths()
        old_offsets = np.r_[0, np.cumsum(old_lengths)].astype(np.int64)
        sets = _concat(Ragged(old_sets.values, old_offsets), sketch.distinct_shingles(new_rows))
        exact = exact_jaccard(sets, left, right)
        ok = exact >= self.threshold
        return cand[ok, 0], cand[ok, 1], exact[ok]

    def _merge_clusters(self, left: npt.NDArray[np.int64], right: npt.NDArray[np.int64]) -> None:
        """Join the clusters that new pairs connect; a cluster's label is its smallest content id."""
        ends = np.unique(np.concatenate([left, right]))
        labels = contents.cluster_labels(self._scope, ends.tolist())
        label_of = np.array([labels[i] for i in ends.tolist()], dtype=np.int64)
        la = label_of[np.searchsorted(ends, left)]
        lb = label_of[np.searchsorted(ends, right)]
        nodes = np.unique(label_of)
        merged = component_labels(nodes, la, lb)
        changed = merged != nodes
        if changed.any():
            contents.relabel_clusters(self._scope, nodes[changed].tolist(), merged[changed].tolist())

    def _drop_orphans(self, content_ids: Sequence[int]) -> list[int]:
        """Delete contents no document points at any more (with buckets, signatures, pairs) and
        recompute the clusters they were in, which may have split."""
        scope = self._scope
        orphan_ids, clusters_hit = contents.orphans(scope, sorted(set(content_ids)))
        if not orphan_ids:
            return []
        ids, sigs = contents.signatures(scope, orphan_ids, self.params.num_perm)
        buckets.delete(scope, *buckets.flat_rows(ids, self._sketcher.band_keys(sigs)))
        contents.delete(scope, orphan_ids)
        members = contents.cluster_members(scope, sorted(set(clusters_hit)))
        if members:
            left, right = pairs.among(scope, members)
            labels = component_labels(members, left, right)
            contents.set_labels(scope, members, labels.tolist())
        return orphan_ids

    def remove(self, ids: Iterable[str]) -> int:
        """Remove documents by id, with their pairs; returns how many were found. Unknown ids are ignored."""
        wanted = list(dict.fromkeys(ids))
        for i, doc_id in enumerate(wanted):
            if not isinstance(doc_id, str):
                raise InputError(f"id {i}: expected a string, got {type(doc_id).__name__}")
        if not wanted:
            return 0
        with translated(f"removing documents from {self.name!r}"), self._conn.transaction():
            self._lock()
            found, content_ids = documents.delete_by_external_id(self._scope, wanted)
            self._drop_orphans(content_ids)
        return len(found)

    def rebuild(
        self,
        threshold: float | None = None,
        *,
        bands: int | None = None,
        rows: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        **fields: Any,
    ) -> None:
        """Change parameters and recompute buckets, pairs and clusters, in one transaction.

        When only the threshold, bands or rows change, buckets come from the stored signatures
        (no text is re-read). Any other change (num_perm, shingles, normalisation, seed, scheme)
        re-sketches every stored text, so it needs a collection that stores text. Bands and rows
        are re-tuned for the threshold unless both are given.
        """
        current = IndexConfig(self.threshold, self.params, self.store_text)
        config = current.changed(threshold, bands=bands, rows=rows, **fields)
        params, new_threshold = config.params, config.threshold
        banding_only = current.rebands_only(config)
        if not banding_only and not self.store_text:
            raise ParamsError(
                f"collection {self.name!r} stores no text, so only threshold, bands and rows can change "
                f"(asked: {'; '.join(self.params.differences(params))})"
            )
        scope = self._scope
        old = (self.params, self._sketcher, self.threshold)
        try:
            with translated(f"rebuilding {self.name!r}"), self._conn.transaction():
                self._lock()
                self.params, self._sketcher, self.threshold = params, Sketcher(params), new_threshold
                collections.set_params(scope, params.to_dict(), new_threshold)
                if banding_only:
                    self._reband()
                else:
                    documents.stash(scope)
                    collections.truncate_all(scope)
                    start = 0
                    for batch in documents.stashed(scope, batch_size):
                        self._add_batch([(i, t, m) for i, t, m in batch], start)
                        start += len(batch)
        except BaseException:
            self.params, self._sketcher, self.threshold = old
            raise

    def _reband(self) -> None:
        """Re-bucket every content from its stored signature and recompute all pairs and clusters."""
        scope = self._scope
        ids, sigs = contents.signatures(scope, None, self.params.num_perm)
        bearing = ~empty_rows(sigs) if ids.size else np.zeros(0, dtype=bool)
        ids, sigs = ids[bearing], sigs[bearing]
        pairs.truncate(scope)
        buckets.truncate(scope)
        buckets.drop_index(scope)
        contents.reset_labels(scope)
        if ids.size:
            buckets.insert(scope, *buckets.flat_rows(ids, self._sketcher.band_keys(sigs)))
        groups = _groups(*buckets.shared_buckets(scope))
        buckets.create_index(scope)
        cand = candidate_pairs(groups, first_new=0)
        if cand.shape[0] == 0:
            return
        # Every content is "stored": lo beyond the largest id makes _verify read them all from the table.
        lo = int(ids.max()) + 1
        empty = Sketch(Ragged(np.empty(0, np.uint32), np.zeros(1, np.int64)), sigs[:0], [])
        left, right, sim = self._verify(cand, lo, {}, empty)
        pairs.insert(scope, left, right, sim, EXACT if self.store_text else ESTIMATE)
        self._merge_clusters(left, right)

    # -- reading -----------------------------------------------------------------------------

    def query(
        self, text: str, min_jaccard: float | None = None, limit: int | None = None
    ) -> list[tuple[str, float]]:
        """Stored documents similar to ``text``, best first: (id, similarity).

        Similarity is the exact Jaccard of the shingle sets when texts are stored, else the
        signature estimate (approximate, standard error sqrt(J(1-J)/num_perm)). Only documents
        sharing a bucket are considered, so below the collection's threshold recall falls off
        along the S-curve.
        """
        if not isinstance(text, str):
            raise InputError(f"query text must be a string, got {type(text).__name__}")
        floor = self.threshold if min_jaccard is None else float(min_jaccard)
        if not 0.0 <= floor <= 1.0:
            raise ParamsError(f"min_jaccard must be in [0, 1], got {min_jaccard}")
        sketch = self._sketcher.sketch([text])
        if sketch.shingle_counts[0] == 0:
            return []
        keys = self._sketcher.band_keys(sketch.signatures)[0]
        with translated(f"querying {self.name!r}"):
            found = buckets.lookup(self._scope, keys, self.store_text)
        if not found:
            return []
        sigs = np.concatenate([sketch.signatures, np.stack([r[1] for r in found])])
        n = len(found)
        zeros, others = np.zeros(n, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64)
        sim = signature_agreement(sigs, zeros, others)
        if self.store_text:
            hopeful = np.flatnonzero(
                sim >= (prefilter_floor(floor, self.params.num_perm) if floor > 0 else 0.0)
            )
            sets = _concat(
                sketch.distinct_shingles(np.zeros(1, np.int64)),
                self._sketcher.shingles([found[i][2] for i in hopeful]),
            )
            sim = np.zeros(n)
            sim[hopeful] = exact_jaccard(
                sets, np.zeros(hopeful.size, np.int64), np.arange(1, hopeful.size + 1)
            )
        results = [(doc_id, float(sim[i])) for i in np.flatnonzero(sim >= floor) for doc_id in found[i][3]]
        results.sort(key=lambda r: (-r[1], r[0]))
        return results[:limit] if limit is not None else results

    def pairs(self, min_jaccard: float | None = None) -> Iterator[tuple[str, str, float]]:
        """Every stored near-duplicate pair (id_a < id_b, similarity), copies of one text included.

        Pairs are stored at the collection's threshold; ``min_jaccard`` can only raise it.
        """
        floor = self.threshold if min_jaccard is None else max(float(min_jaccard), 0.0)
        with translated(f"listing pairs of {self.name!r}"):
            yield from pairs.listing(self._scope, floor)

    def clusters(self) -> Iterator[list[str]]:
        """Connected components of the pairs, two or more ids each, sorted; the first id is the
        cluster's representative."""
        with translated(f"listing clusters of {self.name!r}"):
            for _, group in itertools.groupby(pairs.clusters(self._scope), key=lambda r: r[0]):
                yield [r[1] for r in group]

    def stats(self, largest: int = 5) -> Stats:
        """Counts of documents, contents, pairs and clusters, size on disk and the fullest buckets."""
        with translated(f"reading statistics of {self.name!r}"), self._conn.transaction():
            counts = pairs.counts(self._scope)
            banding = self.params.banding(self.threshold)
            return Stats(
                name=self.name,
                documents=counts["documents"],
                contents=counts["contents"],
                pairs=counts["pairs"],
                identical_pairs=counts["identical_pairs"],
                clusters=counts["clusters"],
                bucket_rows=buckets.count(self._scope),
                bytes_on_disk=pairs.size_on_disk(self._scope),
                largest_buckets=buckets.largest(self._scope, largest),
                params=self.params,
                threshold=self.threshold,
                store_text=self.store_text,
                expected_fp_rate=banding.false_positive_rate,
                expected_fn_rate=banding.false_negative_rate,
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
        if not self.store_text:
            raise TextNotStoredError(
                f"collection {self.name!r} stores no text (created with store_text=False), "
                "so there is nothing to compute the exact Jaccard from"
            )
        if isinstance(sample, bool) or not isinstance(sample, int | np.integer) or sample < 1:
            raise ParamsError(f"sample must be a positive integer, got {sample!r}")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ParamsError(f"seed must be a non-negative integer, got {seed!r}")
        floor = default_floor(self.threshold) if floor is None else float(floor)
        if not 0.0 < floor <= self.threshold:
            raise ParamsError(f"floor must be in (0, threshold = {self.threshold:g}], got {floor}")
        scope, sketcher = self._scope, self._sketcher
        with translated(f"evaluating {self.name!r}"), self._conn.transaction():
            read_snapshot(self._conn)
            population = contents.bearing_ids(scope)
            rng = np.random.Generator(np.random.PCG64(seed))
            chosen = np.sort(rng.choice(population, size=min(sample, population.size), replace=False))
            texts = documents.texts(scope, chosen.tolist())
            join = SetJoin(sketcher.shingles([texts[i] for i in chosen.tolist()]), floor)
            found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
            for ids, chunk in documents.content_texts(scope, EVALUATION_CHUNK):
                i, j, jaccard = join.pairs(sketcher.shingles(chunk))
                found.append((ids[i], chosen[j], jaccard))
            a, b, jaccard = _distinct_pairs(found)
            stored_a, stored_b = pairs.touching(scope, chosen.tolist())
            ends = np.unique(np.concatenate([a, b]))
            ids, sigs = contents.signatures(scope, ends.tolist(), self.params.num_perm)
            if ids.size != ends.size:
                raise SchemaError(f"{ends.size - ids.size} stored contents have no signature")
            keys = sketcher.band_keys(sigs)
            candidate = (keys[np.searchsorted(ids, a)] == keys[np.searchsorted(ids, b)]).any(axis=1)
            edges = similarity_edges(floor, self.threshold)
            histogram = pairs.histogram(scope, edges[:-1])
        return summarise(
            collection=self.name,
            threshold=self.threshold,
            bands=self.params.bands,
            rows=self.params.rows,
            floor=floor,
            seed=int(seed),
            population=int(population.size),
            sample_ids=chosen,
            truth=(a, b, jaccard),
            candidate=candidate,
            stored=(stored_a, stored_b),
            histogram=histogram,
        )


def _distinct_pairs(
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """Join results (stored content, sampled content, J) as distinct pairs a < b sorted, without
    a content paired with itself; two sampled contents meet twice, with the same J."""
    left = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    right = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    jaccard = np.concatenate([p[2] for p in parts]) if parts else np.empty(0, np.float64)
    other = left != right
    left, right, jaccard = left[other], right[other], jaccard[other]
    ends = np.stack([np.minimum(left, right), np.maximum(left, right)], axis=1)
    ends, first = np.unique(ends.reshape(-1, 2), axis=0, return_index=True)
    return ends[:, 0].astype(np.int64), ends[:, 1].astype(np.int64), jaccard[first]


def _check_revision(conn: Connection, scope: Scope) -> None:
    head = migrate.head_revision()
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (scope.sql("{s}.alembic_version").as_string(conn),)
    ).fetchone()
    current = None
    if row and row[0]:
        found = conn.execute(scope.sql("SELECT version_num FROM {s}.alembic_version")).fetchone()
        current = found[0] if found else None
    if current != head:
        raise SchemaError(
            f"schema {scope.schema!r} is at revision {current or 'none'}, this neardup needs {head}: "
            "run `neardup db upgrade`"
        )


__all__ = ["AddResult", "Evaluation", "Index", "NeardupError", "Stats", "UnicodeVersionWarning"]
