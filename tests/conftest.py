"""Suite-wide settings. Speed is measured in bench/, never here, so hypothesis has no deadline
(numba compiles each kernel on first use, which would otherwise trip it)."""

import gc
import hashlib
import importlib
import io
import os
import re
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql
from sqlalchemy.engine import make_url

from neardup.embedded.private_server import throwaway_server

settings.register_profile("neardup", deadline=None, max_examples=100)
settings.register_profile("thorough", deadline=None, max_examples=2000)
# NEARDUP_HYPOTHESIS_PROFILE=thorough runs 20x more examples.
settings.load_profile(os.environ.get("NEARDUP_HYPOTHESIS_PROFILE", "neardup"))

# Where the session's PostgreSQL came from and its version, for the terminal summary.
_database: dict[str, str] = {}


def sqlalchemy_url(url: str) -> str:
    """``url`` with the psycopg 3 driver: accepts postgres://, postgresql:// and postgresql+<driver>://."""
    return re.sub(r"^postgres(?:ql)?(?:\+\w+)?://", "postgresql+psycopg://", url)


def _server(url: str) -> tuple[object, ...]:
    parsed = make_url(sqlalchemy_url(url))
    return parsed.host, parsed.port, parsed.database, tuple(sorted(parsed.query.items()))


def psycopg_url(url: str) -> str:
    """The libpq form of a SQLAlchemy URL, for ``psycopg.connect``; on the Citus coordinator with
    repartition joins on, as neardup's own connections have them (the views need them there)."""
    libpq = sqlalchemy_url(url).replace("postgresql+psycopg://", "postgresql://", 1)
    if CITUS_URL and _server(url) == _server(CITUS_URL):
        libpq += ("&" if "?" in libpq else "?") + "options=-c%20citus.enable_repartition_joins%3Don"
    return libpq


def _docker_answers() -> bool:
    """Whether a Docker engine answers within a few seconds (no engine fails in about 0.1 s)."""

    def ping() -> bool:
        try:
            client = importlib.import_module("docker").from_env(timeout=3)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:
            return False

    with warnings.catch_warnings():
        # A failed connection leaves docker's socket unclosed; collect it here, where that is no error.
        warnings.simplefilter("ignore", ResourceWarning)
        answered = ping()
        gc.collect()
    return answered


# A Citus coordinator (with workers) for the distributed variants of the database tests.
CITUS_URL = os.environ.get("NEARDUP_TEST_CITUS_URL")
CITUS_HOWTO = (
    "set NEARDUP_TEST_CITUS_URL to a Citus coordinator with workers to run the distributed tests "
    "(docs/distributed.md, 'Running the Citus tests')"
)
# Shards per table in the test schemas: few, so that each collection's partitions are quick to make.
CITUS_TEST_SHARDS = 4


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each database test of a module marked ``distributed_variant`` twice when
    NEARDUP_TEST_CITUS_URL is set: on one server, and on a distributed collection."""
    if (
        CITUS_URL
        and "deployment" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("distributed_variant")
    ):
        metafunc.parametrize("deployment", ["single", "citus"], indirect=True, scope="session")


@pytest.fixture(scope="session")
def deployment(request: pytest.FixtureRequest) -> str:
    """``single`` (one PostgreSQL server), or ``citus`` in the distributed variants."""
    return str(getattr(request, "param", "single"))


def differs_on_citus(
    request: pytest.FixtureRequest, deployment: str, reason: str, strict: bool = True
) -> None:
    """Mark the distributed variant of the calling test as expected to fail, for ``reason``: a
    difference of a distributed collection that docs/distributed.md documents (``strict``: it
    always fails there, so a pass is reported)."""
    if deployment == "citus":
        request.applymarker(pytest.mark.xfail(reason=reason, strict=strict))


@pytest.fixture(scope="session")
def citus_url() -> str:
    """The Citus coordinator's URL from NEARDUP_TEST_CITUS_URL; the test is skipped without it."""
    if not CITUS_URL:
        pytest.skip(CITUS_HOWTO)
    return sqlalchemy_url(CITUS_URL)


def distributed_schema(citus_url: str, name: str) -> Iterator[str]:
    """Schema ``name`` on the coordinator, migrated and distributed, while the caller iterates."""
    from neardup.storage import citus
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    for migrated in migrated_schema(citus_url, name):
        with connect(citus_url) as conn, conn.transaction():
            citus.prepare(Scope(conn, migrated), True, CITUS_TEST_SHARDS, "the test coordinator")
        yield migrated


@pytest.fixture(scope="session")
def database_url(deployment: str) -> Iterator[str]:
    """A PostgreSQL URL (``postgresql+psycopg://``) for the session: $NEARDUP_TEST_DATABASE_URL if set,
    else a testcontainers postgres:16 when Docker answers, else a throwaway local server; the
    Citus coordinator of $NEARDUP_TEST_CITUS_URL in the distributed variants."""
    if deployment == "citus" and CITUS_URL:
        yield from _described("NEARDUP_TEST_CITUS_URL", sqlalchemy_url(CITUS_URL))
    elif url := os.environ.get("NEARDUP_TEST_DATABASE_URL"):
        yield from _described("NEARDUP_TEST_DATABASE_URL", sqlalchemy_url(url))
    elif _docker_answers():
        with warnings.catch_warnings():  # testcontainers.postgres warns that it moved to .community
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                postgres = importlib.import_module("testcontainers.community.postgres")
            except ImportError:
                postgres = importlib.import_module("testcontainers.postgres")
        with postgres.PostgresContainer("postgres:16", driver="psycopg") as container:
            yield from _described(
                "testcontainers postgres:16", sqlalchemy_url(container.get_connection_url())
            )
    else:
        with throwaway_server() as server:
            yield from _described(f"throwaway server in {server.data_dir}", server.url)


def _described(source: str, url: str) -> Iterator[str]:
    with psycopg.connect(psycopg_url(url), connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    _database.update(source=source, version=str(row[0]) if row else "?")
    yield url


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which PostgreSQL the database tests ran against, if any did."""
    if _database:
        terminalreporter.write_line(
            f"database_url: PostgreSQL {_database['version']} from {_database['source']}"
        )


def migrated_schema(database_url: str, name: str) -> Iterator[str]:
    """Schema ``name``, freshly migrated, for as long as the caller iterates; dropped afterwards."""
    from neardup.storage import migrate

    migrate.upgrade(database_url, name)
    yield name
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        drop_schema(conn, name)


def drop_schema(conn: psycopg.Connection, name: str) -> None:
    """Drop schema ``name`` with everything in it, each collection's partitions first in a
    transaction of their own. Dropped in one, a distributed schema of some hundred collections
    (~900 Citus tables, ~3,600 shards) locks every shard and its indexes on each worker at once,
    more than PostgreSQL's default lock table holds (``max_locks_per_transaction`` 64: "out of
    shared memory")."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
        (name,),
    ).fetchall()
    collections: dict[str, list[str]] = {}
    for (table,) in rows:
        if match := re.fullmatch(r"[a-z_]+_(c[0-9]+)", table):
            collections.setdefault(match.group(1), []).append(table)
    for tables in collections.values():  # one statement: the foreign keys among them go too
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}").format(
                sql.SQL(", ").join(sql.Identifier(name, t) for t in tables)
            )
        )
    conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def schema(database_url: str, deployment: str) -> Iterator[str]:
    """A freshly migrated neardup schema for this session, dropped afterwards (distributed, with
    every collection in it, in the distributed variants)."""
    if deployment == "citus":
        yield from distributed_schema(database_url, f"nd_citus_{os.getpid()}")
    else:
        yield from migrated_schema(database_url, f"nd_test_{os.getpid()}")


@pytest.fixture
def make_index(database_url: str, schema: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Factory: ``make_index(**create_kwargs)`` creates a collection unique to this test."""
    from neardup.index import Index

    opened: list[Index] = []
    name = request.node.name
    unique = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    base = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:80]}-{unique}"

    def make(**kwargs: Any) -> Index:
        kwargs.setdefault("name", f"{base}.{len(opened)}")
        index = Index.create(database_url, schema=schema, **kwargs)
        opened.append(index)
        return index

    yield make
    for index in opened:
        index.close()


@dataclass
class Run:
    """Runs ``neardup --db URL --schema S --collection C ARGS`` in-process: (status, stdout, stderr)."""

    database_url: str
    schema: str
    collection: str
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        from neardup.cli import main

        self.capsys.readouterr()
        old = sys.stdin
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
        try:
            status = main(
                ["--db", self.database_url, "--schema", self.schema, "--collection", self.collection, *args]
            )
        finally:
            sys.stdin = old
        out, err = self.capsys.readouterr()
        return status, out, err


@pytest.fixture
def cli(
    database_url: str, schema: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> Run:
    """The command line on a collection named after the test."""
    name = request.node.name
    unique = hashlib.blake2b(name.encode(), digest_size=4).hexdigest()
    return Run(database_url, schema, f"cli-{re.sub(r'[^A-Za-z0-9_.-]', '-', name)[:50]}-{unique}", capsys)


def neardup_argv(database_url: str, schema: str, collection: str, *args: str) -> list[str]:
    """The command line running ``neardup`` as its own process on one collection."""
    where = ["--db", database_url, "--schema", schema, "--collection", collection]
    return [sys.executable, "-m", "neardup", *where, *args]


@pytest.fixture
def fresh_schema(database_url: str) -> Iterator[str]:
    """A schema name no one has created yet (tests let neardup create it), dropped afterwards."""
    name = f"nd_fresh_{os.getpid()}"
    yield name
    with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
