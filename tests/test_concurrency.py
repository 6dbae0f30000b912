"""Several `neardup` processes writing one collection at once, and a reader during ingest, against a
real PostgreSQL: nothing lost, nothing duplicated, and the same documents and pairs as one process."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from neardup.core.params import Params
from tests._corpus import brute_force_pairs, planted_corpus
from tests._state import collection_state
from tests.conftest import neardup_argv, psycopg_url

pytestmark = pytest.mark.distributed_variant

# 64 bands of 2 rows: at these similarities LSH misses no pair, so pairs are compared to brute force.
GENEROUS = ("--bands", "64", "--rows", "2")


def _write(path: Path, docs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs), encoding="utf-8")
    return path


@pytest.mark.parametrize("jobs", [1, 2], ids=["one-writer-each", "add-jobs-2-each"])
def test_writer_processes_at_once_end_with_the_state_of_one(
    database_url: str, fresh_schema: str, tmp_path: Path, jobs: int
) -> None:
    docs = planted_corpus(n_sources=60, copies=3, seed=7)  # 240 documents, shuffled
    n = len(docs)
    # Overlapping and disjoint slices; near-copies land in different files, so many pairs can only
    # be found between batches of different writers.
    slices = [docs[: n // 2], docs[n // 3 : 5 * n // 6], docs[::4], docs[5 * n // 6 :]]
    covered = {d for part in slices for d in part}
    assert covered == set(docs)
    files = [_write(tmp_path / f"part{i}.jsonl", part) for i, part in enumerate(slices)]

    # Each writer creates the schema and the collection if missing (they race for both), then adds
    # its file in batches of 5, so the writers' transactions interleave many times. With --jobs 2,
    # each of them runs two writer processes that write contents before their turns: the same
    # texts reach several of them at once, and each text must still be stored once.
    writers = [
        subprocess.Popen(
            [
                "sh",
                "-c",
                " ".join(
                    [
                        *map(
                            _quote,
                            neardup_argv(
                                database_url, fresh_schema, "shared", "init", "--exist-ok", *GENEROUS
                            ),
                        ),
                        "&&",
                        *map(
                            _quote,
                            neardup_argv(
                                database_url,
                                fresh_schema,
                                "shared",
                                "add",
                                str(f),
                                "--batch-size",
                                "5",
                                "--jobs",
                                str(jobs),
                            ),
                        ),
                    ]
                ),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f in files
    ]
    for w in writers:
        _, err = w.communicate(timeout=600)
        assert w.returncode == 0, err

    everything = _write(tmp_path / "all.jsonl", docs)
    for args in (("init", *GENEROUS), ("add", str(everything))):
        done = subprocess.run(
            neardup_argv(database_url, fresh_schema, "alone", *args),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    shared = collection_state(database_url, fresh_schema, "shared")
    alone = collection_state(database_url, fresh_schema, "alone")
    stored = [d[0] for d in shared.documents]
    assert len(stored) == len(set(stored))  # no duplicate documents
    lost = {i for i, _ in docs} - set(stored)
    assert not lost  # no document lost
    assert shared.comparable() == alone.comparable()
    truth = brute_force_pairs(docs, Params(bands=64, rows=2), 0.8)
    assert {(a, b) for a, b, *_ in shared.pairs} == set(truth)
    assert shared.dangling == 0


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def test_a_reader_during_ingest_sees_only_whole_committed_batches(
    database_url: str, tmp_path: Path, deployment: str, request: pytest.FixtureRequest
) -> None:
    # A schema of its own on one server: the session's schema holds every other test's collections
    # by now, and its views' reads slow down with their partitions, so that a reader could miss
    # the batches it is here to watch.
    schema = request.getfixturevalue("schema" if deployment == "citus" else "fresh_schema")
    if deployment == "citus":
        # Citus commits a batch on every node (two-phase commit) but has no distributed snapshot: a
        # read across workers may see it committed on one and not yet on another
        # (docs/distributed.md). Not strict: whether a read lands in that window is timing.
        request.applymarker(
            pytest.mark.xfail(reason="Citus reads across workers are not one snapshot", strict=False)
        )
    docs = planted_corpus(n_sources=60, copies=3, seed=11)
    batch = 6
    source = _write(tmp_path / "docs.jsonl", docs)
    params = Params(bands=64, rows=2)
    # The state after each committed batch k: its documents and the pairs among them.
    expected = {
        k: (
            sorted(i for i, _ in docs[: k * batch]),
            sorted(brute_force_pairs(docs[: k * batch], params, 0.8)),
        )
        for k in range(len(docs) // batch + 1)
    }
    init = subprocess.run(
        neardup_argv(database_url, schema, "watched", "init", *GENEROUS),
        capture_output=True,
        text=True,
        check=False,
    )
    assert init.returncode == 0, init.stderr
    # As a context, so that the pipe is closed and the writer waited for even when an assertion
    # stops the test early (the Citus variant is an expected failure).
    with subprocess.Popen(
        neardup_argv(database_url, schema, "watched", "add", str(source), "--batch-size", str(batch)),
        stderr=subprocess.PIPE,
        text=True,
    ) as writer:
        assert len(docs) % batch == 0
        seen: list[int] = []
        with psycopg.connect(psycopg_url(database_url), autocommit=True) as conn:
            while True:
                running = writer.poll() is None
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    ids = [
                        r[0]
                        for r in conn.execute(
                            f'SELECT id FROM "{schema}".document_list WHERE collection = %s ORDER BY id',
                            ["watched"],
                        )
                    ]
                    pairs = [
                        (r[0], r[1])
                        for r in conn.execute(
                            f'SELECT id_a, id_b FROM "{schema}".pair_list '
                            "WHERE collection = %s ORDER BY 1, 2",
                            ["watched"],
                        )
                    ]
                k, rest = divmod(len(ids), batch)
                assert rest == 0, f"saw {len(ids)} documents: not whole batches"
                assert (ids, pairs) == expected[k], (
                    f"snapshot after {k} batches differs from the committed state"
                )
                seen.append(k)
                if not running:
                    break
                time.sleep(0.005)
        _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert seen[-1] == len(docs) // batch
    # The reader really watched the ingest happen, not just its end.
    assert len({k for k in seen if 0 < k < len(docs) // batch}) >= 2, seen
