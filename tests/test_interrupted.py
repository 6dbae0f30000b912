"""Interrupted ingest against a real PostgreSQL: `neardup add` killed with SIGKILL at random points,
and the server crashing mid-ingest; a re-run with the same input ends in the uninterrupted state."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from neardup.embedded.private_server import LocalServer
from tests._corpus import planted_corpus
from tests._state import State, collection_state
from tests.conftest import neardup_argv, psycopg_url

pytestmark = pytest.mark.distributed_variant

BATCH = 20


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)


def _corpus(tmp_path: Path, n_sources: int, seed: int) -> Path:
    path = tmp_path / "docs.jsonl"
    docs = planted_corpus(n_sources=n_sources, copies=3, seed=seed)
    path.write_text(
        "".join(json.dumps({"id": i, "text": t, "n": k}) + "\n" for k, (i, t) in enumerate(docs)),
        encoding="utf-8",
    )
    return path


def _committed(url: str, schema: str, collection: str) -> int:
    with psycopg.connect(psycopg_url(url), autocommit=True) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}".document_list WHERE collection = %s', [collection]
        ).fetchone()
    return int(row[0]) if row else 0


def _consistent(state: State, total: int) -> None:
    """Between runs the collection holds whole batches and no row without its owner."""
    assert len(state.documents) % BATCH == 0 or len(state.documents) == total
    assert state.dangling == 0


def test_add_killed_at_random_points_then_rerun_ends_in_the_uninterrupted_state(
    database_url: str, schema: str, tmp_path: Path
) -> None:
    source = _corpus(tmp_path, n_sources=150, seed=3)  # 600 documents, 30 batches
    total = len(source.read_text(encoding="utf-8").splitlines())
    for name in ("whole", "killed"):
        assert _run(neardup_argv(database_url, schema, name, "init")).returncode == 0
    started = time.monotonic()
    whole = _run(neardup_argv(database_url, schema, "whole", "add", str(source), "--batch-size", str(BATCH)))
    assert whole.returncode == 0, whole.stderr
    duration = time.monotonic() - started

    rng = random.Random(20261121)
    kills = 0
    for _ in range(6):
        # Kill points spread over the whole run: during start-up, mid-batch, around commits. A
        # rerun only has what is left to write, so the points are spread over that share of the
        # run (a run killed at its very end may have committed everything, and the next ones,
        # with nothing to write, would finish before a point drawn over the whole).
        left = 1.0 - _committed(database_url, schema, "killed") / total
        delay = rng.uniform(0.0, duration) * left
        proc = subprocess.Popen(
            neardup_argv(database_url, schema, "killed", "add", str(source), "--batch-size", str(BATCH)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        if proc.poll() is None:
            proc.kill()
            kills += 1
        proc.wait()
        _consistent(collection_state(database_url, schema, "killed"), total)
    assert kills >= 3  # most runs were really cut short

    rerun = _run(neardup_argv(database_url, schema, "killed", "add", str(source), "--batch-size", str(BATCH)))
    assert rerun.returncode == 0, rerun.stderr
    expected = collection_state(database_url, schema, "whole")
    got = collection_state(database_url, schema, "killed")
    assert len(got.documents) == total  # no document lost
    assert got.comparable() == expected.comparable()


@pytest.fixture
def own_server() -> object:
    """A server of this test's own (it is crashed and restarted), removed afterwards."""
    data_dir = Path(tempfile.mkdtemp(prefix="neardup-restart-", dir="/var/tmp"))
    data_dir.chmod(0o755)
    server = LocalServer(data_dir / "pg", durable=True)
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_server_crash_mid_ingest_gives_a_clear_error_and_a_rerun_completes(
    own_server: LocalServer, tmp_path: Path
) -> None:
    source = _corpus(tmp_path, n_sources=500, seed=5)  # 2,000 documents, 100 batches
    url, schema = own_server.url, "neardup"
    for name in ("whole", "crashed"):
        assert _run(neardup_argv(url, schema, name, "init")).returncode == 0
    assert (
        _run(neardup_argv(url, schema, "whole", "add", str(source), "--batch-size", str(BATCH))).returncode
        == 0
    )

    proc = subprocess.Popen(
        neardup_argv(url, schema, "crashed", "add", str(source), "--batch-size", str(BATCH)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while _committed(url, schema, "crashed") < 2 * BATCH:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    own_server.stop(mode="immediate")  # as a crash: no checkpoint, recovery from the WAL at start
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("neardup: error: ")
    assert "server" in lines[0] or "connection" in lines[0]
    assert lines[0].endswith("run the same command again to finish the import")

    own_server.start()
    url = own_server.url
    _consistent(collection_state(url, schema, "crashed"), 2000)
    rerun = _run(neardup_argv(url, schema, "crashed", "add", str(source), "--batch-size", str(BATCH)))
    assert rerun.returncode == 0, rerun.stderr
    got, expected = collection_state(url, schema, "crashed"), collection_state(url, schema, "whole")
    assert len(got.documents) == 2000  # no document lost
    assert got.comparable() == expected.comparable()
