"""Alembic migrations on a real PostgreSQL: upgrade from empty, downgrade to empty, again with data."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

import neardup
from neardup.core.sketch import Sketcher
from neardup.errors import SchemaError
from neardup.index import Index
from neardup.storage import migrate
from neardup.storage.binary import signature_matrix
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

TABLES = {
    "collections",
    "contents",
    "documents",
    "signatures",
    "buckets",
    "pairs",
    "changes",
    "tokens",
    "sessions",
    "labels",
    "document_keys",
}
VIEWS = {"document_list", "pair_list", "cluster_list", "pair_labels", "dense_clusters"}


@pytest.fixture
def fresh_schema(database_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"nd_mig_{abs(hash(request.node.name)) % 10**8}"
    yield name
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _objects(url: str, schema: str) -> dict[str, set[str]]:
    with psycopg.connect(psycopg_url(url)) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v') AND NOT c.relispartition",
            (schema,),
        ).fetchall()
    out: dict[str, set[str]] = {"tables": set(), "views": set()}
    for name, kind in rows:
        out["views" if kind == "v" else "tables"].add(name)
    return out


def test_upgrade_from_empty_and_downgrade_to_empty(database_url: str, fresh_schema: str) -> None:
    assert migrate.current_revision(database_url, fresh_schema) is None
    migrate.upgrade(database_url, fresh_schema)
    assert migrate.current_revision(database_url, fresh_schema) == migrate.head_revision()
    objects = _objects(database_url, fresh_schema)
    assert objects["tables"] == TABLES | {"alembic_version"}
    assert objects["views"] == VIEWS
    migrate.downgrade(database_url, fresh_schema)
    assert migrate.current_revision(database_url, fresh_schema) is None
    assert _objects(database_url, fresh_schema) == {"tables": {"alembic_version"}, "views": set()}


def test_upgrade_is_idempotent_and_keeps_data(database_url: str, fresh_schema: str) -> None:
    with Index.create(database_url, "kept", 0.5, schema=fresh_schema) as index:
        index.add([("a", "some words to keep around"), ("b", "some words to keep around!")])
    migrate.upgrade(database_url, fresh_schema)
    with Index.open(database_url, "kept", schema=fresh_schema) as index:
        assert [p[:2] for p in index.pairs()] == [("a", "b")]


def test_downgrade_then_upgrade_again_with_other_collections(database_url: str, fresh_schema: str) -> None:
    with Index.create(database_url, "first", schema=fresh_schema) as index:
        index.add([("a", "text")])
    migrate.downgrade(database_url, fresh_schema)
    with pytest.raises(SchemaError, match=r"migrate it with Database\(url\)\.upgrade\(\)$"):
        Index.open(database_url, "first", schema=fresh_schema)
    migrate.upgrade(database_url, fresh_schema)
    with Index.create(database_url, "second", schema=fresh_schema) as index:
        assert index.stats().documents == 0


def test_two_schemas_are_independent(database_url: str, fresh_schema: str, schema: str) -> None:
    with Index.create(database_url, "same-name", schema=fresh_schema) as one:
        one.add([("x", "only in the first schema")])
    with Index.create(database_url, "same-name", schema=schema) as two:
        assert two.stats().documents == 0


def _foreign_keys(url: str, schema: str) -> set[str]:
    with psycopg.connect(psycopg_url(url)) as conn:
        rows = conn.execute(
            "SELECT c.conname FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "WHERE n.nspname = %s AND c.contype = 'f' AND NOT t.relispartition",
            (schema,),
        ).fetchall()
    return {r[0] for r in rows}


def test_0002_drops_the_row_foreign_keys_and_its_downgrade_restores_them_over_data(
    database_url: str, fresh_schema: str
) -> None:
    keys = {"documents_content_fkey", "pairs_content_a_fkey", "pairs_content_b_fkey"}
    with Index.create(database_url, "kept", schema=fresh_schema) as index:
        index.add([("a", "the same long text about storms"), ("b", "the same long text about storms!")])
        before = sorted(index.pairs())
    assert before
    assert not _foreign_keys(database_url, fresh_schema) & keys
    migrate.downgrade(database_url, fresh_schema, "0001")  # checks every stored row against contents
    assert _foreign_keys(database_url, fresh_schema) >= keys
    migrate.upgrade(database_url, fresh_schema)
    assert not _foreign_keys(database_url, fresh_schema) & keys
    with Index.open(database_url, "kept", schema=fresh_schema) as index:
        assert sorted(index.pairs()) == before


def _has_distributed_column(url: str, schema: str) -> bool:
    with psycopg.connect(psycopg_url(url)) as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'collections' AND column_name = 'distributed')",
            (schema,),
        ).fetchone()
    return bool(row and row[0])


def test_0004_records_whether_a_collection_is_distributed_and_downgrades(
    database_url: str, fresh_schema: str
) -> None:
    migrate.upgrade(database_url, fresh_schema, "0003")
    assert not _has_distributed_column(database_url, fresh_schema)
    assert "document_keys" not in _objects(database_url, fresh_schema)["tables"]
    migrate.upgrade(database_url, fresh_schema)
    assert _has_distributed_column(database_url, fresh_schema)
    assert "document_keys" in _objects(database_url, fresh_schema)["tables"]
    with Index.create(database_url, "plain", schema=fresh_schema) as index:
        assert not index.distributed
    migrate.downgrade(database_url, fresh_schema, "0003")
    assert not _has_distributed_column(database_url, fresh_schema)
    assert "document_keys" not in _objects(database_url, fresh_schema)["tables"]
    assert migrate.current_revision(database_url, fresh_schema) == "0003"


def test_0005_counts_writes_from_zero_and_downgrades(database_url: str, fresh_schema: str) -> None:
    migrate.upgrade(database_url, fresh_schema, "0004")
    with Index.create(database_url, "before", schema=fresh_schema) as index:
        pass
    migrate.upgrade(database_url, fresh_schema)
    with Index.open(database_url, "before", schema=fresh_schema) as index:
        index.add([("a", "some text to store"), ("b", "other words entirely")])
        index.remove(["b"])
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(
            f'SELECT writes FROM "{fresh_schema}".collections WHERE name = %s', ("before",)
        ).fetchone()
    assert row == (2,)  # one add (one batch) and one removal, counted from 0
    migrate.downgrade(database_url, fresh_schema, "0004")
    assert migrate.current_revision(database_url, fresh_schema) == "0004"
    with psycopg.connect(psycopg_url(database_url)) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'collections'",
            (fresh_schema,),
        ).fetchall()
    assert ("writes",) not in columns


def _hash_index(url: str, schema: str) -> tuple[str, bool] | None:
    """The index on contents (collection_id, content_hash): its name and whether it is unique."""
    with psycopg.connect(psycopg_url(url)) as conn:
        row = conn.execute(
            "SELECT i.relname, x.indisunique FROM pg_index x "
            "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            "WHERE n.nspname = %s AND t.relname = 'contents' "
            "AND pg_get_indexdef(x.indexrelid) LIKE '%%(collection_id, content_hash)'",
            (schema,),
        ).fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


def test_0006_makes_the_content_hash_index_plain_keeping_data_and_downgrades(
    database_url: str, fresh_schema: str
) -> None:
    migrate.upgrade(database_url, fresh_schema, "0005")
    assert _hash_index(database_url, fresh_schema) == ("contents_hash_key", True)
    with Index.create(database_url, "before", schema=fresh_schema) as index:
        index.add([("a", "some text to store here"), ("b", "some text to store here")])
    migrate.upgrade(database_url, fresh_schema)
    assert _hash_index(database_url, fresh_schema) == ("contents_hash_idx", False)
    with Index.open(database_url, "before", schema=fresh_schema) as index:
        index.add([("c", "some text to store here"), ("d", "other words entirely")])
        assert index.stats().contents == 2  # hashes are still matched: one content for a, b, c
    migrate.downgrade(database_url, fresh_schema, "0005")
    assert _hash_index(database_url, fresh_schema) == ("contents_hash_key", True)


def _view(url: str, schema: str) -> tuple[str, list[tuple[str, str, float]]]:
    """pair_list's definition and its rows, read with SQL (an Index opens only the head revision)."""
    with psycopg.connect(psycopg_url(url)) as conn:
        (source,) = conn.execute(
            "SELECT pg_get_viewdef(%s::regclass)", (f'"{schema}".pair_list',)
        ).fetchone() or ("",)
        rows = conn.execute(
            f'SELECT id_a, id_b, similarity FROM "{schema}".pair_list ORDER BY id_a, id_b'
        ).fetchall()
    return str(source), [(a, b, float(j)) for a, b, j in rows]


def test_0007_lists_the_same_pairs_from_shared_contents_and_downgrades(
    database_url: str, fresh_schema: str
) -> None:
    text = "the same words in the same order, stored three times over"
    docs = [("a", text), ("b", text), ("c", text.upper()), ("d", text + " and then some"), ("e", "unrelated")]
    with Index.create(database_url, "copies", threshold=0.5, schema=fresh_schema) as index:  # at the head
        index.add(docs)
        listed = list(index.pairs())
    assert {(a, b) for a, b, j in listed if j == 1.0} == {("a", "b"), ("a", "c"), ("b", "c")}
    assert ("a", "d") in {(a, b) for a, b, _ in listed}
    source, rows = _view(database_url, fresh_schema)
    assert "HAVING" in source
    assert rows == listed
    migrate.downgrade(database_url, fresh_schema, "0006")
    source, rows = _view(database_url, fresh_schema)
    assert "HAVING" not in source  # 0001's definition again
    assert rows == listed
    migrate.upgrade(database_url, fresh_schema)
    source, rows = _view(database_url, fresh_schema)
    assert "HAVING" in source
    assert rows == listed


def _stored_signatures(url: str, schema: str) -> dict[str, Any]:
    """Each document's stored signature value, as the database driver gives it (bytes or a list)."""
    with psycopg.connect(psycopg_url(url)) as conn:
        rows = conn.execute(
            f'SELECT d.external_id, s.signature FROM "{schema}".documents d JOIN "{schema}".signatures s '
            "ON s.collection_id = d.collection_id AND s.content_id = d.content_id"
        ).fetchall()
    return {r[0]: r[1] for r in rows}


def test_0008_stores_signatures_as_bytes_and_downgrades_to_the_same_integers(
    database_url: str, fresh_schema: str
) -> None:
    docs = [("a", "a text about storms and the sea"), ("b", "a text about storms and the sea!"), ("e", "")]
    with Index.create(database_url, "sigs", threshold=0.5, schema=fresh_schema) as index:  # at the head
        index.add(docs)
        expected = {doc_id: Sketcher(index.params).signatures([text])[0] for doc_id, text in docs}
        pairs = list(index.pairs())
    assert pairs
    stored = _stored_signatures(database_url, fresh_schema)
    assert {k: signature_matrix([v], 128)[0].tolist() for k, v in stored.items()} == {
        k: v.tolist() for k, v in expected.items()
    }
    migrate.downgrade(database_url, fresh_schema, "0007")
    as_integers = _stored_signatures(database_url, fresh_schema)
    # integer[] as before 0008: each value's uint32 bits as a signed integer.
    assert as_integers == {k: v.view(np.int32).tolist() for k, v in expected.items()}
    migrate.upgrade(database_url, fresh_schema)
    assert _stored_signatures(database_url, fresh_schema) == stored
    with psycopg.connect(psycopg_url(database_url)) as conn:
        functions = conn.execute(
            f'SELECT "{fresh_schema}".signature_values(signature), '
            f'"{fresh_schema}".signature_bytes("{fresh_schema}".signature_values(signature)) = signature '
            f'FROM "{fresh_schema}".signatures s JOIN "{fresh_schema}".documents d '
            "ON d.collection_id = s.collection_id AND d.content_id = s.content_id WHERE d.external_id = 'a'"
        ).fetchone()
    # The schema's functions read a stored signature as those integers, and write them back.
    assert functions == (expected["a"].view(np.int32).tolist(), True)
    with Index.open(database_url, "sigs", schema=fresh_schema) as index:
        assert list(index.pairs()) == pairs
        assert [m[0] for m in index.query(docs[0][1])] == ["a", "b"]


def test_0009_keeps_existing_clusters_and_their_smallest_id_representative(
    database_url: str, fresh_schema: str
) -> None:
    with Index.create(database_url, "old", 0.5, schema=fresh_schema) as index:
        base = "a story about the storm that cut power to forty thousand homes last night"
        index.add([("z", base), ("m", base + " again"), ("q", "nothing alike at all, words apart")])
    query = f'SELECT cluster, id, representative FROM "{fresh_schema}".cluster_list ORDER BY id'
    migrate.downgrade(database_url, fresh_schema, "0008")
    with psycopg.connect(psycopg_url(database_url)) as conn:
        before = conn.execute(query).fetchall()
    assert [(i, r) for _, i, r in before] == [("m", True), ("z", False)]  # the smallest id, as 0008 had it
    migrate.upgrade(database_url, fresh_schema)
    with psycopg.connect(psycopg_url(database_url)) as conn:
        assert conn.execute(query).fetchall() == before  # the same clusters, ids and representatives
    with Index.open(database_url, "old", schema=fresh_schema) as index:
        assert index.keep == "id"  # existing collections keep what they showed
        (cluster,) = index.clusters()
        assert (cluster.id, cluster.representative) == (before[0][0], "m")
    with Index.create(database_url, "new", schema=fresh_schema) as index:
        assert index.keep == "first"


def test_the_head_known_without_alembic_is_alembics_head() -> None:
    assert migrate.head_revision() == migrate.HEAD_REVISION


def test_a_schema_behind_or_ahead_is_refused_without_and_with_alembic(
    database_url: str, fresh_schema: str
) -> None:
    migrate.upgrade(database_url, fresh_schema, "0008")
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        with pytest.raises(SchemaError, match="at revision 0008, this neardup needs 0012"):
            migrate.require_head(conn, fresh_schema)
        conn.execute(f'UPDATE "{fresh_schema}".alembic_version SET version_num = %s', ("0099",))
        with pytest.raises(SchemaError, match="at revision 0099"):
            migrate.require_head(conn, fresh_schema)
        conn.execute(f'UPDATE "{fresh_schema}".alembic_version SET version_num = %s', ("0012",))
        migrate.require_head(conn, fresh_schema)
    assert not migrate.is_head("0008")
    assert not migrate.is_head(None)
    assert migrate.is_head("0012")


def test_opening_an_index_at_the_head_imports_no_alembic(database_url: str, fresh_schema: str) -> None:
    with Index.create(database_url, "light", schema=fresh_schema) as index:
        index.add([("a", "a text to find again"), ("b", "another text entirely")])
    script = (
        "import sys\n"
        "from neardup.index import Index\n"
        f"with Index.open({database_url!r}, 'light', schema={fresh_schema!r}) as index:\n"
        "    hits = index.query('a text to find again')\n"
        "heavy = sorted(m for m in ('alembic', 'sqlalchemy', 'numba', 'scipy') if m in sys.modules)\n"
        "print(hits, heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(neardup.__file__).parents[1])},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('a', 1.0)] []"


def test_0011_gives_the_lookup_index_band_and_content_only_where_neighbours_are_kept(
    database_url: str, fresh_schema: str
) -> None:
    docs = [("a", "a story about the storm that cut power to forty thousand homes"), ("b", "another text")]
    for name, neighbours in (("plain", False), ("kept", True)):
        with Index.create(database_url, name, 0.5, schema=fresh_schema, neighbours=neighbours) as index:
            index.add(docs)
    query = (
        "SELECT c.name, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
        f"JOIN \"{fresh_schema}\".collections c ON t.relname IN ('buckets_c' || c.collection_id, "
        "'contents_c' || c.collection_id) WHERE n.nspname = %s "
        "AND pg_get_indexdef(i.indexrelid) ~ '\\((bucket|shingle_count)\\)'"
    )

    def definitions() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        with psycopg.connect(psycopg_url(database_url)) as conn:
            for name, d in conn.execute(query, (fresh_schema,)):
                found.setdefault(name, []).append(d.split(" USING btree ")[1])
        return {name: sorted(d) for name, d in found.items()}

    after = {"plain": ["(bucket)"], "kept": ["(bucket) INCLUDE (content_id)", "(shingle_count)"]}
    assert definitions() == after
    migrate.downgrade(database_url, fresh_schema, "0010")
    assert definitions() == {"plain": ["(bucket)"], "kept": ["(bucket)"]}
    migrate.upgrade(database_url, fresh_schema)
    assert definitions() == after
    with Index.open(database_url, "kept", schema=fresh_schema) as index:
        assert [d for d, _ in index.query(docs[0][1], k=2)] == ["a"]


def test_0012_lists_the_dense_clusters_of_collections_stored_before_it_and_downgrades(
    database_url: str, fresh_schema: str
) -> None:
    base = " ".join(f"w{i:03d}" for i in range(60))
    copies = [(f"c{i:03d}", base.replace(f"w{i % 60:03d}", f"x{i:03d}")) for i in range(130)]
    with Index.create(database_url, "old", schema=fresh_schema):
        pass
    with psycopg.connect(psycopg_url(database_url)) as conn:  # parameters stored before the field
        conn.execute(
            f"UPDATE \"{fresh_schema}\".collections SET params = params - 'dense_cluster_size' "
            "WHERE name = 'old'"
        )
    with Index.open(database_url, "old", schema=fresh_schema) as index:
        index.add(copies)
        (cluster,) = index.clusters()
    with psycopg.connect(psycopg_url(database_url)) as conn:
        rows = conn.execute(
            f'SELECT collection, cluster, contents FROM "{fresh_schema}".dense_clusters'
        ).fetchall()
    assert rows == [("old", cluster.id, 130)]  # the default bound, 128, for parameters without it
    migrate.downgrade(database_url, fresh_schema, "0011")
    assert "dense_clusters" not in _objects(database_url, fresh_schema)["views"]
    migrate.upgrade(database_url, fresh_schema)
    assert "dense_clusters" in _objects(database_url, fresh_schema)["views"]


# -- a schema as the first release made it, with rows in it, brought to the head ---------------------

FIRST_RELEASE_TEXTS = [
    ("ap-1", "storms cut power to forty thousand homes on monday across the northern valley"),
    ("afp-7", "storms cut power to forty thousand homes on monday across the northern valleys"),
    ("rt-3", "storms cut the power to forty thousand homes on monday across the northern valley"),
    ("ap-2", "the central bank left its rates where they were for a third month running"),
    ("bbc-9", "the central bank left its rates where they were for a third month running"),
    ("ap-3", "a local team won the cup after extra time in a match that few will forget"),
    ("ap-4", ""),
]


def _rows(url: str, schema: str, name: str) -> dict[str, Any]:
    """A collection's catalog row and its partitions' rows, as stored."""
    s = f'"{schema}"'
    with psycopg.connect(psycopg_url(url)) as conn:
        (cid, params, threshold, store_text, unicode_version, next_content, next_doc) = (
            conn.execute(
                f"SELECT collection_id, params, threshold, store_text, unicode_version, next_content_id, "
                f"next_doc_id FROM {s}.collections WHERE name = %s",
                (name,),
            ).fetchone()
            or (None,) * 7
        )
        tables = {
            "contents": "content_id, content_hash, shingle_count, cluster_id",
            "documents": "doc_id, external_id, content_id, text, meta",
            "signatures": "content_id, signature",
            "buckets": "band, bucket, content_id",
            "pairs": "content_a, content_b, similarity, method",
        }
        rows = {
            t: conn.execute(f"SELECT {c} FROM {s}.{t} WHERE collection_id = %s", (cid,)).fetchall()
            for t, c in tables.items()
        }
    catalog = (params, threshold, store_text, unicode_version, next_content, next_doc)
    return {"catalog": catalog, **rows}


def _as_first_release(url: str, schema: str, name: str, made: dict[str, Any]) -> None:
    """Collection ``name`` written into a schema at revision 0001 as that release wrote it: its
    parameters without the fields added since, signatures as integer[], each partition made by
    hand with the unique bucket index of that time."""
    params, threshold, store_text, unicode_version, next_content, next_doc = made["catalog"]
    old_params = {
        k: v for k, v in params.items() if k not in ("recall_at_threshold", "neighbours", "neighbour_floor")
    }
    s = f'"{schema}"'
    with psycopg.connect(psycopg_url(url)) as conn:
        (cid,) = conn.execute(
            f"INSERT INTO {s}.collections (name, params, threshold, store_text, unicode_version, "
            "next_content_id, next_doc_id) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING collection_id",
            (name, Jsonb(old_params), threshold, store_text, unicode_version, next_content, next_doc),
        ).fetchone() or (None,)
        for table in ("contents", "documents", "signatures", "buckets", "pairs"):
            conn.execute(f'CREATE TABLE {s}."{table}_c{cid}" PARTITION OF {s}.{table} FOR VALUES IN ({cid})')
        conn.execute(
            f'CREATE UNIQUE INDEX "buckets_c{cid}_lookup" ON {s}."buckets_c{cid}" (band, bucket, content_id)'
        )
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {s}.contents VALUES ({cid}, %s, %s, %s, %s)", made["contents"])
            cur.executemany(
                f"INSERT INTO {s}.documents (collection_id, doc_id, external_id, content_id, text, meta) "
                f"VALUES ({cid}, %s, %s, %s, %s, %s)",
                [(d, e, c, t, Jsonb(m) if m is not None else None) for d, e, c, t, m in made["documents"]],
            )
            num_perm = params["num_perm"]
            cur.executemany(
                f"INSERT INTO {s}.signatures VALUES ({cid}, %s, %s)",
                [
                    (c, signature_matrix([bytes(sig)], num_perm)[0].view(np.int32).tolist())
                    for c, sig in made["signatures"]
                ],
            )
            cur.executemany(f"INSERT INTO {s}.buckets VALUES ({cid}, %s, %s, %s)", made["buckets"])
            cur.executemany(f"INSERT INTO {s}.pairs VALUES ({cid}, %s, %s, %s, %s)", made["pairs"])


def test_a_schema_made_at_the_first_revision_with_rows_migrates_to_the_head(
    database_url: str, fresh_schema: str, schema: str
) -> None:
    # The rows the first release would have written: those this one writes, in the layout of then.
    with Index.create(database_url, "today", 0.5, schema=schema, keep="id") as today:
        today.add([(i, t, {"n": n}) for n, (i, t) in enumerate(FIRST_RELEASE_TEXTS)])
        made = _rows(database_url, schema, "today")
        assert made["pairs"]  # near-copies, and identical texts sharing a content
    migrate.upgrade(database_url, fresh_schema, "0001")
    _as_first_release(database_url, fresh_schema, "archive", made)
    assert migrate.current_revision(database_url, fresh_schema) == "0001"
    with pytest.raises(SchemaError, match="at revision 0001"):
        Index.open(database_url, "archive", schema=fresh_schema)

    migrate.upgrade(database_url, fresh_schema)  # through every migration, over the rows
    assert migrate.current_revision(database_url, fresh_schema) == migrate.head_revision()
    with (
        Index.open(database_url, "archive", schema=fresh_schema) as old,
        Index.open(database_url, "today", schema=schema) as today,
    ):
        assert old.keep == "id"  # what the first release showed
        # Its parameters as stored then: no recall target (it had none), the same bands and rows.
        assert old.params == dataclasses.replace(today.params, recall_at_threshold=None)
        assert list(old.pairs()) == list(today.pairs())
        assert [(c.id, c.representative, list(c)) for c in old.clusters()] == [
            (c.id, c.representative, list(c)) for c in today.clusters()
        ]
        text = FIRST_RELEASE_TEXTS[0][1]
        assert old.query(text) == today.query(text)
        # New writes go on from the old counters and meet the old rows.
        later = [("late", FIRST_RELEASE_TEXTS[3][1] + " again"), ("ap-3", "a replaced text, all new words")]
        assert old.add(later) == today.add(later)
        assert list(old.pairs()) == list(today.pairs())
        assert old.stats().documents == today.stats().documents == len(FIRST_RELEASE_TEXTS) + 1
