"""The embedded default database: where its data lives, that it persists, that concurrent users share it."""

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import platformdirs
import psycopg
import pytest

from neardup.storage import embedded
from neardup.storage.embedded import default_data_dir, embedded_database
from tests.conftest import psycopg_url

AS_ROOT = os.geteuid() == 0


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(psycopg_url(url), connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh 0755 $NEARDUP_HOME under /var/tmp: as root, 'nobody' cannot reach pytest's tmp_path."""
    path = Path(tempfile.mkdtemp(prefix="neardup-home-", dir="/var/tmp"))
    path.chmod(0o755)  # our own new directory
    monkeypatch.setenv("NEARDUP_HOME", str(path))
    yield path
    pid_file = path / "pg18" / "postmaster.pid"
    assert not pid_file.exists(), "a test left the server running"
    shutil.rmtree(path)


def test_neardup_home_overrides_the_data_dir_for_everyone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEARDUP_HOME", "/srv/nd")
    for euid in (0, 1000):
        monkeypatch.setattr(os, "geteuid", lambda euid=euid: euid)
        assert default_data_dir() == Path("/srv/nd/pg18")


def test_as_root_the_data_dir_is_under_var_lib_and_nothing_is_created(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NEARDUP_HOME", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    existed = Path("/var/lib/neardup").exists()
    assert default_data_dir() == Path("/var/lib/neardup/pg18")
    assert Path("/var/lib/neardup").exists() == existed


def test_a_normal_user_gets_the_platform_user_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEARDUP_HOME", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert default_data_dir() == Path(platformdirs.user_data_dir("neardup", appauthor=False)) / "pg18"
    if sys.platform.startswith("linux"):
        monkeypatch.setenv("XDG_DATA_HOME", "/home/someone/.data")
        assert default_data_dir() == Path("/home/someone/.data/neardup/pg18")


def test_an_empty_neardup_home_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEARDUP_HOME", "")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert default_data_dir() == Path("/var/lib/neardup/pg18")


def test_data_persists_from_one_context_to_the_next(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="neardup.server")
    with embedded_database() as url:
        assert url.startswith("postgresql+psycopg://postgres@/postgres?host=/")
        assert query(url, "SHOW fsync") == [("on",)]  # durable
        with psycopg.connect(psycopg_url(url)) as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY, body text)")
            conn.execute("INSERT INTO kept VALUES (1, 'héllo')")
    assert (home / "pg18" / "PG_VERSION").is_file()
    assert not (home / "pg18" / "postmaster.pid").exists()  # stopped on exit
    with pytest.raises(psycopg.OperationalError):
        query(url, "SELECT 1")
    with embedded_database() as again:
        assert query(again, "SELECT id, body FROM kept") == [(1, "héllo")]
    if AS_ROOT:
        assert f"runs as user 'nobody' with its data in {home / 'pg18'}" in caplog.text


def test_concurrent_starts_share_one_server_until_the_last_leaves(home: Path) -> None:
    ready, inside, leave_first = threading.Barrier(2), threading.Barrier(2, timeout=30), threading.Event()
    urls: dict[str, str] = {}
    errors: list[BaseException] = []

    def user(name: str) -> None:
        try:
            ready.wait(10)  # start at once
            with embedded_database() as url:
                urls[name] = url
                inside.wait()  # both are in, whichever started the server
                if name == "second":
                    leave_first.wait(60)
                    assert query(url, "SELECT 1") == [(1,)]  # the first one's exit left it running
        except BaseException as exc:
            errors.append(exc)
        finally:
            if name == "first":
                leave_first.set()

    threads = [threading.Thread(target=user, args=(name,)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert not errors, errors
    assert urls["first"] == urls["second"]
    assert not (home / "pg18" / "postmaster.pid").exists()  # the last one out stopped it


CHILD = """
import sys
import psycopg
from neardup.storage.embedded import embedded_database
with embedded_database() as url:
    with psycopg.connect(url.replace("+psycopg", "", 1)) as conn:
        print(conn.execute("SELECT pg_postmaster_start_time()").fetchall(), flush=True)
    sys.stdin.readline()
"""


def test_two_processes_started_at_once_share_one_server(home: Path) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        starts = [child.stdout.readline().strip() if child.stdout else "" for child in children]
        assert starts[0] == starts[1] != ""
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
    assert [child.returncode for child in children] == [0, 0]
    assert not (home / "pg18" / "postmaster.pid").exists()


def test_only_the_directories_made_for_the_server_get_their_mode(home: Path) -> None:
    private = home / "private"
    private.mkdir(mode=0o700)
    old_umask = os.umask(0o077)  # as strict as root's umask may be
    try:
        embedded._make_dirs(private / "made" / "here", 0o755)
    finally:
        os.umask(old_umask)
    assert private.stat().st_mode & 0o777 == 0o700  # existing: left alone
    assert (private / "made").stat().st_mode & 0o777 == 0o755
    assert (private / "made" / "here").stat().st_mode & 0o777 == 0o755
