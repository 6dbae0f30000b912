"""Least privilege and hostile values, against a real PostgreSQL: the README's read-only role can read
every view and run the read commands but write nothing; ids and collection names full of quotes,
semicolons and Unicode reach SQL only as bound values."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import errors as pg_errors
from sqlalchemy.engine import make_url

from neardup.cli import main
from neardup.errors import ParamsError
from neardup.index import Index
from neardup.storage import catalog
from neardup.storage.connect import connect
from neardup.storage.scope import Scope
from tests._corpus import planted_corpus
from tests._state import collection_state
from tests.conftest import psycopg_url

pytestmark = pytest.mark.distributed_variant

README = Path(__file__).resolve().parents[1] / "README.md"
HOSTILE_IDS = [
    "O'Brien",
    "'; DROP TABLE documents; --",
    "Robert'); DROP TABLE collections;--",
    '"quoted" \\"escaped\\"',
    "back\\slash and $1 and %s and %(x)s and {0}",
    "tab\there",
    "new\nline and\r\nreturn",
    "naïve café ﬁnance",
    "名前 עברית العربية",
    "emoji 🎉👩‍👩‍👧",
    "  leading and trailing spaces  ",
    "x" * 1500,
]
HOSTILE_COLLECTIONS = [
    "x'; DROP SCHEMA neardup CASCADE; --",
    'a"b',
    "semi;colon",
    "naïve",
    "名前",
    "",
    "a b",
    "../etc",
    "-starts-with-dash",
    "trailing\n",
    "x" * 101,
]


def _reader_statements(schema: str, role: str) -> list[str]:
    """The README's statements for neardup_reader, for this schema and role."""
    text = README.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if "neardup_reader" in line and not line.startswith("--")]
    assert len(lines) == 4, lines
    return [
        line.replace("neardup_reader", role)
        .replace("SCHEMA neardup ", f'SCHEMA "{schema}" ')
        .replace("PASSWORD '...'", "PASSWORD 'reader-pw'")
        for line in lines
    ]


@pytest.fixture
def reader(database_url: str, fresh_schema: str, deployment: str) -> Iterator[str]:
    """A login role made with the README's reader statements; its URL. Dropped afterwards."""
    role = f"nd_reader_{os.getpid()}"
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        if not conn.execute(
            "SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]:  # type: ignore[index]
            pytest.skip("the test database's user may not create roles")
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        # The schema must exist (distributed in the Citus variant).
        Index.create(database_url, "news", schema=fresh_schema, distributed=deployment == "citus").close()
        for statement in _reader_statements(fresh_schema, role):
            conn.execute(statement)
    yield (
        make_url(database_url).set(username=role, password="reader-pw").render_as_string(hide_password=False)
    )
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(
            f'ALTER DEFAULT PRIVILEGES IN SCHEMA "{fresh_schema}" REVOKE SELECT ON TABLES FROM "{role}"'
        )
        conn.execute(f'DROP OWNED BY "{role}"')
        conn.execute(f'DROP ROLE "{role}"')


def _cli(capsys: pytest.CaptureFixture[str], url: str, schema: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["--db", url, "--schema", schema, *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_the_read_only_role_reads_everything_and_writes_nothing(
    database_url: str, fresh_schema: str, reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = planted_corpus(n_sources=10, copies=2, seed=5)
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    with Index.open(database_url, "news", schema=fresh_schema) as index:
        index.add(docs)
    # A collection made after the grant: its new partitions are readable too.
    with Index.create(database_url, "later", schema=fresh_schema) as index:
        index.add(docs[:12])
    before = {c: collection_state(database_url, fresh_schema, c) for c in ("news", "later")}

    with psycopg.connect(psycopg_url(reader), autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (make_url(reader).username,)
        for view in ("document_list", "pair_list", "cluster_list"):
            for collection in ("news", "later"):
                got = conn.execute(
                    f'SELECT count(*) FROM "{fresh_schema}".{view} WHERE collection = %s', [collection]
                ).fetchone()
                assert got is not None
                assert got[0] > 0
        writes = [
            "INSERT INTO {s}.collections (name, params, threshold, store_text, unicode_version) "
            "VALUES ('x', '{{}}', 0.5, true, '15')",
            "UPDATE {s}.documents SET text = 'changed'",
            "DELETE FROM {s}.pairs",
            "TRUNCATE {s}.buckets",
            "CREATE TABLE {s}.intruder (x int)",
            "DROP VIEW {s}.pair_list",
            "SELECT set_config('search_path', 'x', false); DELETE FROM {s}.contents",
        ]
        for statement in writes:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                conn.execute(statement.format(s=f'"{fresh_schema}"'))

    for collection in ("news", "later"):
        for command in (["pairs"], ["clusters"], ["stats"], ["query", "--text", docs[0][1]]):
            as_owner = _cli(capsys, database_url, fresh_schema, "--collection", collection, *command)
            as_reader = _cli(capsys, reader, fresh_schema, "--collection", collection, *command)
            assert as_reader[0] == 0, as_reader[2]
            if command[0] != "stats":  # stats names the connection's user in the database URL
                assert as_reader[1] == as_owner[1]
    refused = [
        ["--collection", "news", "add", str(source)],
        ["--collection", "news", "remove", docs[0][0]],
        ["--collection", "fresh", "init"],
        ["db", "downgrade", "--yes"],
    ]
    for args in refused:
        status, _, err = _cli(capsys, reader, fresh_schema, *args)
        assert status == 1, args
        # One error line; a downgrade first says what it drops (its --yes given), then fails.
        assert err.count("\n") == (2 if "downgrade" in args else 1), err
        assert "permission denied" in err.splitlines()[-1], err
    assert {c: collection_state(database_url, fresh_schema, c) for c in ("news", "later")} == before


def test_hostile_ids_round_trip_as_bound_values(
    make_index: object, database_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = "Storm knocks out power across the northern suburbs overnight, utility crews at work"
    texts = {i: f"{base} {n % 3}" if n % 2 else f"{base}." for n, i in enumerate(HOSTILE_IDS)}
    index: Index = make_index()  # type: ignore[operator]
    index.add([(i, t, {"note": i}) for i, t in texts.items()])
    state = collection_state(database_url, schema, index.name)
    assert [d[0] for d in state.documents] == sorted(HOSTILE_IDS, key=lambda s: s.encode())
    assert all(d[2] == {"note": d[0]} for d in state.documents)
    assert {i for i, _ in index.query(base)} >= {i for i, t in texts.items() if t == base}
    paired = {i for p in index.pairs() for i in p[:2]}
    assert paired == set(HOSTILE_IDS)
    assert sorted(i for c in index.clusters() for i in c) == sorted(HOSTILE_IDS)

    # Every output format gives the ids back exactly.
    for fmt in ("tsv", "csv", "jsonl", "json"):
        capsys.readouterr()
        args = [
            "--db",
            database_url,
            "--schema",
            schema,
            "--collection",
            index.name,
            "pairs",
            "--format",
            fmt,
        ]
        assert main(args) == 0
        out = capsys.readouterr().out
        if fmt in ("tsv", "csv"):
            rows = list(csv.reader(io.StringIO(out), delimiter="\t" if fmt == "tsv" else ","))[1:]
            ids = {r[0] for r in rows} | {r[1] for r in rows}
        else:
            records = json.loads(out) if fmt == "json" else [json.loads(x) for x in out.splitlines()]
            ids = {r["id_a"] for r in records} | {r["id_b"] for r in records}
        assert ids == set(HOSTILE_IDS), fmt

    assert index.remove(HOSTILE_IDS[:6]) == 6
    left = [d[0] for d in collection_state(database_url, schema, index.name).documents]
    assert sorted(left) == sorted(HOSTILE_IDS[6:])


@pytest.mark.parametrize("name", HOSTILE_COLLECTIONS, ids=lambda n: re.sub(r"\W", "_", n)[:20] or "empty")
def test_hostile_collection_names_are_refused_and_would_be_bound_anyway(
    name: str, database_url: str, schema: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ParamsError, match=r"collection name .* is not allowed"):
        Index.create(database_url, name, schema=schema)
    capsys.readouterr()
    assert main(["--db", database_url, "--schema", schema, f"--collection={name}", "init"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("neardup: error: collection name ")
    assert err.count("\n") == 1
    # Below the check, the storage layer binds the name as a value: a lookup finds nothing and runs
    # nothing, and the schema keeps every table.
    conn = connect(database_url)
    try:
        assert catalog.get(Scope(conn, schema), name) is None
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename = ANY(%s)",
            [schema, ["collections", "documents", "contents", "buckets", "pairs", "signatures"]],
        ).fetchone()
    finally:
        conn.close()
    assert tables == (6,)
