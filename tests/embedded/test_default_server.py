"""The embedded default database: where its data lives, that it persists, that concurrent users share
it, that it outlives a command and stops once idle, and never while in use."""

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs
import psycopg
import pytest

from neardup.embedded import default_server as embedded
from neardup.embedded.default_server import (
    default_data_dir,
    embedded_database,
    server_state,
    stop_server,
)
from neardup.errors import ServerError
from tests.conftest import psycopg_url

AS_ROOT = os.geteuid() == 0


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(psycopg_url(url), connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def stop_everything(data_dir: Path) -> None:
    """Stop the server on data_dir and its watchdog, whatever state a (failed) test left them in."""
    paths = embedded._Paths.of(data_dir)
    watchdog = embedded._watchdog(paths)
    try:
        stop_server(data_dir)
    except ServerError:  # still 'in use' by a leaked child: stop it anyway
        if (pid := embedded._postmaster_pid(data_dir)) is not None:
            embedded._stop_postmaster(data_dir, pid)
    if watchdog is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(watchdog.pid, signal.SIGKILL)


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> float:
    """Seconds until condition() held, polling; fails the test after timeout seconds."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(0.05)
    return time.monotonic() - start


def alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):  # a zombie (its parent has not reaped it yet) is gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh 0755 $NEARDUP_HOME under /var/tmp (as root, 'nobody' cannot reach pytest's tmp_path);
    the server stops as the last user leaves unless a test sets an idle timeout."""
    path = Path(tempfile.mkdtemp(prefix="neardup-home-", dir="/var/tmp"))
    path.chmod(0o755)  # our own new directory
    monkeypatch.setenv("NEARDUP_HOME", str(path))
    monkeypatch.setenv("NEARDUP_SERVER_IDLE_TIMEOUT", "0")
    try:
        yield path
    finally:
        stop_everything(path / "pg18")
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
from neardup.embedded.default_server import embedded_database
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


def test_the_idle_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NEARDUP_SERVER_IDLE_TIMEOUT", raising=False)
    assert embedded.configured_idle_timeout() == 300
    monkeypatch.setenv("NEARDUP_SERVER_IDLE_TIMEOUT", " 2.5 ")
    assert embedded.configured_idle_timeout() == 2.5
    for bad in ("-1", "soon", "nan", "inf"):
        monkeypatch.setenv("NEARDUP_SERVER_IDLE_TIMEOUT", bad)
        with pytest.raises(ServerError, match="NEARDUP_SERVER_IDLE_TIMEOUT must be a number of seconds"):
            embedded.configured_idle_timeout()


def test_the_server_outlives_its_user_and_the_next_one_reuses_it(home: Path) -> None:
    with embedded_database(idle_timeout=60) as url:
        with psycopg.connect(psycopg_url(url)) as conn:
            conn.execute("CREATE TABLE kept (id int)")
        first = server_state()
    assert first.running
    assert first.pid is not None
    assert first.in_use
    assert first.idle_seconds is None
    after = server_state()
    assert after.running
    assert after.pid == first.pid
    assert not after.in_use
    assert after.idle_seconds is not None
    assert after.idle_seconds < 30
    assert after.idle_timeout == 60
    assert after.watchdog_pid is not None
    assert alive(after.watchdog_pid)
    with embedded_database(idle_timeout=60) as again:
        assert again == url
        assert query(again, "SELECT count(*) FROM kept") == [(0,)]
        assert server_state().pid == first.pid  # attached, not restarted
    assert stop_server() == first.pid
    assert not server_state().running
    wait_for(lambda: not alive(after.watchdog_pid))  # told to go with its server
    assert stop_server() is None  # nothing left to stop


def test_it_stops_once_idle_for_the_timeout(home: Path) -> None:
    with embedded_database(idle_timeout=2):
        pass
    left = time.monotonic()
    state = server_state()
    assert state.running
    assert state.watchdog_pid is not None
    wait_for(lambda: not server_state().running)
    assert time.monotonic() - left >= 1.9  # not before the timeout (mtime and clocks agree to ms)
    assert not (home / "pg18" / "postmaster.pid").exists()  # a clean shutdown
    wait_for(lambda: not alive(state.watchdog_pid))  # and its watchdog went with it


def test_a_server_in_use_is_not_stopped_past_the_timeout(home: Path) -> None:
    with embedded_database(idle_timeout=1) as url:
        pid = server_state().pid
        time.sleep(4)  # four timeouts
        assert query(url, "SELECT 1") == [(1,)]
        assert server_state().pid == pid
        with pytest.raises(ServerError, match="in use by another neardup command"):
            stop_server()
        assert query(url, "SELECT 1") == [(1,)]
    wait_for(lambda: not server_state().running)


def test_a_dead_watchdog_is_replaced_by_the_next_user(home: Path) -> None:
    with embedded_database(idle_timeout=60):
        pass
    state = server_state()
    assert state.watchdog_pid is not None
    os.kill(state.watchdog_pid, signal.SIGKILL)
    wait_for(lambda: server_state().watchdog_pid is None)
    assert server_state().running  # the server itself is untouched
    with embedded_database(idle_timeout=2) as url:
        assert query(url, "SELECT 1") == [(1,)]
    again = server_state()
    assert again.pid == state.pid
    assert again.watchdog_pid not in (None, state.watchdog_pid)
    assert again.idle_timeout == 2  # the newest setting applies
    wait_for(lambda: not server_state().running)


def test_concurrent_processes_share_one_server_that_outlives_them(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEARDUP_SERVER_IDLE_TIMEOUT", "60")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        starts = [child.stdout.readline().strip() if child.stdout else "" for child in children]
        assert starts[0] == starts[1] != ""
        assert server_state().in_use
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
    assert [child.returncode for child in children] == [0, 0]
    state = server_state()
    assert state.running
    assert not state.in_use
    assert state.watchdog_pid is not None
    with embedded_database() as url:
        assert str(query(url, "SELECT pg_postmaster_start_time()")) == starts[0]
