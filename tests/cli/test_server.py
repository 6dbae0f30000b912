"""`neardup server status|stop` and the embedded server between commands, as separate processes."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from neardup.embedded.default_server import server_state
from tests.embedded.test_default_server import CHILD, stop_everything, wait_for

pytestmark = pytest.mark.distributed_variant

TEXT = "the quick brown fox jumps over the lazy dog"


class Neardup:
    """Runs ``python -m neardup`` on the embedded default in a home of its own."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if k != "NEARDUP_DATABASE_URL"}
        self.env.update(NEARDUP_HOME=str(home), HOME=str(home), NEARDUP_SERVER_IDLE_TIMEOUT="60")

    def __call__(self, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "neardup", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            check=False,
            timeout=120,
        )

    def status(self) -> dict[str, object]:
        done = self("server", "status", "--format", "json")
        assert done.returncode == 0, done.stderr
        return {row["name"]: row["value"] for row in json.loads(done.stdout)}


@pytest.fixture
def neardup() -> Iterator[Neardup]:
    """The command line on a fresh 0755 home under /var/tmp ('nobody' must reach it as root); the
    server and its watchdog are stopped afterwards, whatever the test did."""
    home = Path(tempfile.mkdtemp(prefix="nd-home-", dir="/var/tmp"))
    home.chmod(0o755)
    try:
        yield Neardup(home)
    finally:
        stop_everything(home / "pg18")
        shutil.rmtree(home, ignore_errors=True)


def test_commands_share_one_server_that_server_stop_ends(neardup: Neardup) -> None:
    assert neardup("init", "--threshold", "0.5").returncode == 0
    added = neardup("add", "-", stdin=json.dumps({"id": "a", "text": TEXT}) + "\n")
    assert added.returncode == 0, added.stderr
    first = neardup.status()
    assert first["running"] is True
    assert first["in_use"] is False
    assert first["data_directory"] == str(neardup.home / "pg18")
    assert first["socket"]
    assert first["idle_timeout"] == 60
    assert isinstance(first["watchdog_pid"], int)
    found = neardup("query", "--text", TEXT)
    assert found.stdout.splitlines() == ["id\tjaccard", "a\t1.0"]
    assert neardup.status()["pid"] == first["pid"]  # the second command reused the server

    stopped = neardup("server", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped the embedded server (pid {first['pid']})" in stopped.stderr
    assert neardup.status()["running"] is False
    again = neardup("server", "stop")
    assert (again.returncode, again.stderr.strip()) == (0, "the embedded server is not running")

    found = neardup("query", "--text", TEXT)  # starts it again: the data is still there
    assert found.stdout.splitlines() == ["id\tjaccard", "a\t1.0"]
    restarted = neardup.status()
    assert restarted["running"] is True
    assert restarted["pid"] != first["pid"]


def test_it_stops_by_itself_after_the_idle_timeout(neardup: Neardup) -> None:
    assert neardup("init", NEARDUP_SERVER_IDLE_TIMEOUT="3").returncode == 0
    # Read in this process at once: starting another one may take longer than the timeout.
    state = server_state(neardup.home / "pg18")
    assert state.running
    assert state.idle_timeout == 3
    wait_for(lambda: not server_state(neardup.home / "pg18").running)
    status = neardup.status()
    assert status["running"] is False
    assert status["watchdog_pid"] is None
    assert (neardup.home / "pg18" / "PG_VERSION").is_file()  # stopped, not removed


def test_stop_refuses_while_a_command_uses_the_server(neardup: Neardup) -> None:
    user = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=neardup.env,
    )
    try:
        assert user.stdout is not None
        assert user.stdout.readline().strip()  # connected
        assert neardup.status()["in_use"] is True
        refused = neardup("server", "stop")
        assert refused.returncode == 1
        assert refused.stderr.splitlines() == [
            f"neardup: error: the embedded server on {neardup.home / 'pg18'} is in use by another "
            "neardup command; run this again when it ends"
        ]
        assert neardup.status()["running"] is True
    finally:
        user.communicate("\n", timeout=60)
    assert user.returncode == 0
    assert neardup("server", "stop").returncode == 0
    assert neardup.status()["running"] is False


def test_with_a_database_url_it_says_the_embedded_server_is_not_used(
    neardup: Neardup, database_url: str
) -> None:
    assert neardup("init").returncode == 0
    done = neardup("--db", database_url, "server", "status")
    assert done.returncode == 0
    assert "commands do not use the embedded server" in done.stderr
    assert "running\ttrue" in done.stdout.splitlines()
    from_env = neardup("server", "status", NEARDUP_DATABASE_URL=database_url)
    assert "commands do not use the embedded server" in from_env.stderr


def test_status_of_a_server_never_started_creates_nothing(neardup: Neardup) -> None:
    status = neardup.status()
    assert status["running"] is False
    assert status["pid"] is None
    assert status["data_directory"] == str(neardup.home / "pg18")
    assert list(neardup.home.iterdir()) == []
