"""The image built from docker/Dockerfile runs the service against a real PostgreSQL.

Opt-in (building takes minutes): set NEARDUP_TEST_CONTAINERS=1 on a machine where podman or docker
answers, and NEARDUP_TEST_DATABASE_URL to a PostgreSQL reachable over TCP (the container shares
the host's network). Where no public registry is reachable, NEARDUP_TEST_BASE_IMAGE names a local
Debian-like base with python3 and python3-venv (see docker/README.md), and NEARDUP_TEST_PIP_CERT a
CA bundle for pip inside the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.service.conftest import free_port, make_token

pytestmark = pytest.mark.distributed_variant

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/neardup-test:latest"
# What podman needs in this kind of sandbox (crun fails on hybrid cgroups; setrlimit is refused
# without explicit limits); harmless elsewhere.
CONTAINERS_CONF = """[engine]
runtime = "runc"
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
"""


def _engine() -> str | None:
    for name in ("podman", "docker"):
        path = shutil.which(name)
        if path and subprocess.run([path, "info"], capture_output=True, timeout=60).returncode == 0:
            return path
    return None


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    """The container engine's path and the environment to run it with."""
    if os.environ.get("NEARDUP_TEST_CONTAINERS") != "1":
        pytest.skip(
            "container test is opt-in (building the image takes minutes): set NEARDUP_TEST_CONTAINERS=1 "
            "with podman or docker installed (apt-get install -y podman runc)"
        )
    conf = tmp_path_factory.mktemp("containers") / "containers.conf"
    conf.write_text(CONTAINERS_CONF)
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    path = _engine()
    if path is None:
        pytest.skip(
            "no container engine answers (`podman info` / `docker info`): apt-get install -y podman runc"
        )
    return path, env


@pytest.fixture(scope="module")
def image(engine: tuple[str, dict[str, str]]) -> str:
    """The image built from docker/Dockerfile (once for the module)."""
    tool, env = engine
    build = [tool, "build", "-f", "docker/Dockerfile", "-t", IMAGE]
    if base := os.environ.get("NEARDUP_TEST_BASE_IMAGE"):
        build += ["--build-arg", f"BASE={base}"]
    if cert := os.environ.get("NEARDUP_TEST_PIP_CERT"):
        build += ["--secret", f"id=pip-cert,src={cert}"]
    built = subprocess.run([*build, "."], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return IMAGE


# The image's own user, and any other uid, which can write neither the image's numba cache nor a
# home directory: the kernels must still load (docker/README.md).
@pytest.mark.parametrize("user", [None, "4242:4242"], ids=["image-user", "any-uid"])
def test_the_image_serves_the_api_against_postgresql(
    engine: tuple[str, dict[str, str]], image: str, schema: str, user: str | None
) -> None:
    tool, env = engine
    url = os.environ.get("NEARDUP_TEST_DATABASE_URL", "")
    if not url or not make_url(url).host:
        pytest.skip("set NEARDUP_TEST_DATABASE_URL to a PostgreSQL reachable over TCP for the container")
    token = make_token(url, schema, "admin", name="container")
    port = free_port()
    name = f"neardup-test-{os.getpid()}"
    run = [tool, "run", "-d", "--rm", "--name", name, "--network", "host"]
    run += ["--user", user] if user else []
    run += [image, "--db", url, "--schema", schema, "serve", "--host", "127.0.0.1", "--port", str(port)]
    started = subprocess.run(run, env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=300) as c:
            assert c.get("/healthz").json() == {"status": "ok"}
            c.delete("/v1/collections/container")
            assert c.post("/v1/collections", json={"name": "container", "threshold": 0.5}).status_code == 201
            docs = [{"id": "a", "text": "the quick brown fox jumps over the lazy dog"}]
            docs.append({"id": "b", "text": "the quick brown fox jumped over the lazy dog"})
            assert c.post("/v1/collections/container/documents", json=docs).json()["new_pairs"] == 1
            pairs = c.get("/v1/collections/container/pairs").json()["pairs"]
            assert [(p["id_a"], p["id_b"]) for p in pairs] == [("a", "b")]
            assert c.get("/v1/collections/container/documents/a").json()["pairs"][0]["id"] == "b"
            # Enough text that the kernels load numba (and its cache) rather than run as numpy.
            many = [
                {"id": f"m{i}", "text": f"document {i} of a batch large enough to compile"}
                for i in range(3000)
            ]
            assert c.post("/v1/collections/container/documents", json=many).json()["added"] == 3000
    finally:
        logs = subprocess.run([tool, "logs", name], env=env, capture_output=True, text=True, timeout=60)
        subprocess.run([tool, "rm", "-f", name], env=env, capture_output=True, timeout=120)
        assert token not in logs.stdout + logs.stderr
    assert "Traceback" not in logs.stdout + logs.stderr, logs.stderr[-3000:]
