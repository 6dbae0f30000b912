"""A real ``neardup serve`` process on a free loopback port, against the session's PostgreSQL."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from neardup.database import Database

# A fresh process imports numpy, numba's cached kernels and FastAPI: seconds on a busy machine.
STARTUP_SECONDS = 90


def free_port() -> int:
    """A TCP port nothing listens on now, on the loopback address."""
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Service:
    """A running ``neardup serve``: its base URL, process and log."""

    base: str
    process: subprocess.Popen[bytes]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, token: str | None = None) -> httpx.Client:
        """An HTTP client for the service, sending ``token`` as a bearer token (closed after the test)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        client = httpx.Client(base_url=self.base, headers=headers, timeout=60)
        self.clients.append(client)
        return client

    def close_clients(self) -> None:
        """Close the clients made so far."""
        while self.clients:
            self.clients.pop().close()

    def log_text(self) -> str:
        """Everything the server wrote so far."""
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_service(url: str, schema: str, log: Path, *args: str, host: str = "127.0.0.1") -> Service:
    """Start ``python -m neardup --db URL --schema S serve --port N ARGS`` and wait for /healthz."""
    port = free_port()
    argv = [sys.executable, "-m", "neardup", "--db", url, "--schema", schema, "serve", "--host", host]
    argv += ["--port", str(port), *args]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    service = Service(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"neardup serve exited with {process.returncode}:\n{service.log_text()}")
        try:
            if httpx.get(f"{service.base}/healthz", timeout=2).status_code in (200, 503):
                return service
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    service.stop()
    raise AssertionError(f"neardup serve did not answer within {STARTUP_SECONDS} s:\n{service.log_text()}")


def make_token(url: str, schema: str, access: str, collection: str | None = None, name: str = "") -> str:
    """A new token stored in the schema, as `neardup token create` stores it."""
    with Database(url, schema) as db:
        return db.tokens.create(access, collection, name)[1]


@pytest.fixture(scope="session")
def service(database_url: str, schema: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One server for the session's schema, with tokens: read, write, admin (every collection) and
    ``other`` (admin, limited to the collection ``other``)."""
    log = tmp_path_factory.mktemp("service") / "serve.log"
    running = start_service(database_url, schema, log, "--max-body-bytes", str(1024 * 1024))
    running.tokens = {
        access: make_token(database_url, schema, access, name=f"test-{access}")
        for access in ("read", "write", "admin")
    }
    running.tokens["other"] = make_token(database_url, schema, "admin", "other", "test-other")
    yield running
    running.close_clients()
    running.stop()


@pytest.fixture(autouse=True)
def _close_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close the HTTP clients a test opened (an open socket is a ResourceWarning, an error here)."""
    yield
    if "service" in request.fixturenames:
        request.getfixturevalue("service").close_clients()
