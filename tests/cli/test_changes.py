"""`neardup changes` and `neardup changes-feed` against a real PostgreSQL, in-process and following
as a process of its own."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import Run, neardup_argv

pytestmark = pytest.mark.distributed_variant


def _jsonl(path: Path, docs: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs))
    return path


def test_changes_lists_the_writes_and_resumes_from_the_printed_since(cli: Run, tmp_path: Path) -> None:
    assert cli("init", "--changes-feed", "--threshold", "0.5")[0] == 0
    docs = [("a", "the cat sat on the warm mat today"), ("b", "the cat sat on the warm mat today!")]
    assert cli("add", str(_jsonl(tmp_path / "one.jsonl", docs)))[0] == 0
    status, out, err = cli("changes", "--format", "jsonl", "--limit", "2")
    assert status == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert [(r["kind"], r["id"]) for r in rows[:2]] == [("document.added", "a"), ("document.added", "b")]
    assert {"kind": "pair.added", "id_a": "a", "id_b": "b"}.items() <= rows[2].items()
    assert f"next --since {rows[-1]['seq']}" in err
    assert cli("remove", "a")[0] == 0
    status, out, err = cli("changes", "--since", str(rows[-1]["seq"]), "--format", "tsv")
    lines = out.splitlines()
    assert status == 0
    assert lines[0].split("\t")[:3] == ["seq", "at", "kind"]
    # b stays alone with the cluster's id (ids last while connected): no cluster event.
    assert [line.split("\t")[2] for line in lines[1:]] == ["document.removed", "pair.removed"]


def test_a_since_no_longer_kept_or_no_feed_exits_non_zero(cli: Run) -> None:
    assert cli("init")[0] == 0
    status, _, err = cli("changes")
    assert status == 1
    assert "keeps no changes feed" in err
    assert cli("add", "-", stdin='{"id": "x", "text": "written before the feed"}\n')[0] == 0
    status, _, err = cli("changes-feed", "on", "--retention-hours", "24")
    assert status == 0, err
    status, out, err = cli("changes", "--format", "jsonl")  # --since 0: every change kept, none yet
    assert (status, out) == (0, ""), err
    seen = int(err.rsplit("--since ", 1)[1])
    assert cli("add", "-", stdin='{"id": "y", "text": "written with the feed on"}\n')[0] == 0
    assert cli("changes-feed", "off")[0] == 0
    assert cli("add", "-", stdin='{"id": "z", "text": "written with the feed off"}\n')[0] == 0
    assert cli("changes-feed", "on")[0] == 0
    status, _, err = cli("changes", "--since", str(seen))  # the write to z was never recorded
    assert status == 1
    assert "no longer all kept" in err
    assert cli("changes-feed", "off")[0] == 0
    status, _, err = cli("changes-feed", "off", "--retention-hours", "3")
    assert status == 1
    assert "give it with changes_feed" in err


def test_follow_prints_each_write_as_it_commits(database_url: str, schema: str, cli: Run) -> None:
    assert cli("init", "--changes-feed")[0] == 0
    argv = neardup_argv(database_url, schema, cli.collection, "changes", "--follow", "--format", "jsonl")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as follower:
        try:
            lines: list[dict[str, object]] = []

            def read() -> None:
                assert follower.stdout is not None
                for line in follower.stdout:
                    lines.append(json.loads(line))
                    if len(lines) == 3:
                        return

            reader = threading.Thread(target=read)
            reader.start()
            for doc in ("one", "two", "three"):
                assert (
                    cli("add", "-", stdin=json.dumps({"id": doc, "text": f"text number {doc}"}) + "\n")[0]
                    == 0
                )
            reader.join(120)  # a liveness bound: each line comes at its commit
            assert not reader.is_alive()
        finally:
            follower.terminate()
    assert [(r["kind"], r["id"]) for r in lines] == [("document.added", d) for d in ("one", "two", "three")]
