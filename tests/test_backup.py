"""`neardup backup` and `neardup restore` against a real PostgreSQL: a schema restored into another
database holds the same documents, pairs, clusters (ids and representatives), labels, tokens and
changes, takes new adds where the old one left off, and a restore never lands on a schema that
exists unless asked to replace it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from neardup.cli import main
from neardup.credentials import digest
from neardup.database import Database
from tests._state import collection_state
from tests.conftest import drop_schema, psycopg_url

TEXTS = [
    "storms cut power to forty thousand homes on monday across the northern valley",
    "storms cut power to forty thousand homes on monday across the northern valleys",
    "the central bank left its rates where they were for a third month running",
    "the central bank left its rates where they were for the third month running",
    "a local team won the cup after extra time in a match that few will forget",
]


@pytest.fixture
def second_database(database_url: str) -> Iterator[str]:
    """The URL of a new, empty database on the same server, dropped afterwards."""
    name = f"nd_restore_{os.getpid()}"
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_url(database_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _everything(url: str, schema: str) -> dict[str, Any]:
    """What a user can read of the schema: each collection's documents, pairs, clusters with their
    ids and representatives, settings and counters; labels, tokens and the changes feed."""
    out: dict[str, Any] = {}
    with Database(url, schema) as db:
        for c in db.collections():
            with db.open(c.name) as index:
                clusters = sorted((cl.id, cl.representative, list(cl)) for cl in index.clusters())
                out[c.name] = (
                    collection_state(url, schema, c.name),
                    clusters,
                    c.params,
                    c.threshold,
                    index.keep,
                    (c.documents, c.pairs, c.clusters),
                )
        out["labels"] = [(r.collection, r.id_a, r.id_b, r.label, r.note) for r in db.labels.export()]
        out["tokens"] = [
            (t.token_id, t.prefix, t.scope, t.collection, t.name, t.revoked_at) for t in db.tokens.list()
        ]
        out["changes"] = [c.to_dict() for c in db.changes("news", 0, limit=10_000).changes]
    return out


def _cli(url: str, schema: str, *args: str) -> int:
    return main(["--db", url, "--schema", schema, *args])


def test_a_restored_schema_is_the_same_and_takes_new_adds(
    database_url: str, fresh_schema: str, second_database: str, tmp_path: Path, capsys: Any
) -> None:
    schema = fresh_schema
    with Database(database_url, schema) as db:
        with db.create("news", threshold=0.5, changes_feed=True) as news:
            news.add([(f"n{i}", t, {"n": i}) for i, t in enumerate(TEXTS)])
            news.add([("late", TEXTS[0] + " again"), ("n4", "a replaced text about something else")])
            news.remove(["n2"])
        with db.create("other", threshold=0.5, keep="longest") as other:
            other.add([(f"o{i}", t) for i, t in enumerate(reversed(TEXTS))])
        db.labels.put("news", "n0", "n1", "duplicate", "the same storm", None, "tester")
        _, kept_secret = db.tokens.create("read", "news", "reader")
        revoked, _ = db.tokens.create("admin", None, "gone")
        db.tokens.revoke(revoked)
    before = _everything(database_url, schema)
    assert before["news"][1]
    assert before["changes"]
    assert before["labels"]

    archive = tmp_path / "backup.dump"
    assert _cli(database_url, schema, "backup", "--out", str(archive)) == 0
    assert _cli(second_database, schema, "restore", str(archive)) == 0
    assert f"restored schema {schema!r}" in capsys.readouterr().err
    assert _everything(second_database, schema) == before

    with Database(second_database, schema) as db:
        assert db.tokens.lookup(digest(kept_secret)) is not None  # a token made before still works
        with db.open("news") as news:
            result = news.add([("new", TEXTS[2] + " once more")])
            assert (result.added, result.new_pairs) == (1, 1)
            assert ("n3", "new") in {(a, b) for a, b, *_ in news.pairs()}
        after = db.changes("news", before["changes"][-1]["seq"]).changes
        assert after[0].seq == before["changes"][-1]["seq"] + 1  # numbering goes on, nothing reused
        assert ("document.added", "new") in [(c.kind, c.id) for c in after]

    # A schema that exists is never overwritten unasked; --replace puts the backup back whole.
    assert _cli(second_database, schema, "restore", str(archive)) == 1
    assert "exists" in capsys.readouterr().err
    assert _cli(second_database, schema, "restore", str(archive), "--replace") == 0
    assert _everything(second_database, schema) == before
    with psycopg.connect(psycopg_url(second_database), autocommit=True) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{schema[:40]}_replaced_%",)
        ).fetchall()
        assert left == []  # the replaced schema went once the restore committed
        drop_schema(conn, schema)


def test_restore_names_the_schema_a_backup_holds_and_refuses_what_is_no_backup(
    database_url: str, fresh_schema: str, second_database: str, tmp_path: Path, capsys: Any
) -> None:
    with Database(database_url, fresh_schema) as db, db.create("c") as c:
        c.add([("a", TEXTS[0])])
    archive = tmp_path / "backup.dump"
    assert _cli(database_url, fresh_schema, "backup", "--out", str(archive)) == 0
    assert _cli(second_database, "elsewhere", "restore", str(archive)) == 1
    assert f"holds schema {fresh_schema!r}, not 'elsewhere'; restore it with --schema {fresh_schema}" in (
        capsys.readouterr().err
    )
    junk = tmp_path / "junk.dump"
    junk.write_bytes(b"not a backup at all")
    assert _cli(second_database, fresh_schema, "restore", str(junk)) == 1
    assert "not a neardup backup" in capsys.readouterr().err
    assert _cli(database_url, "no_such_schema_here", "backup", "--out", str(tmp_path / "x.dump")) == 1
    assert "there is no schema 'no_such_schema_here'" in capsys.readouterr().err
