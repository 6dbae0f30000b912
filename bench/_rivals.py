"""The libraries neardup is measured against, used as their users use them: datasketch's and
rensa's MinHash of the ground truth's shingle strings, and a private redis-server for datasketch's
Redis storage."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import NUM_PERM, SEED, free_port, truth_shingles


def datasketch_minhash(text: str) -> Any:
    """datasketch's MinHash of the text's shingle strings (UTF-8), one at a time."""
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM, seed=SEED)
    m.update_batch([s.encode("utf-8") for s in truth_shingles(text)])
    return m


def rensa_minhash(text: str) -> Any:
    """rensa's RMinHash of the text's shingle strings."""
    from rensa import RMinHash

    m = RMinHash(num_perm=NUM_PERM, seed=SEED)
    m.update(list(truth_shingles(text)))
    return m


@contextmanager
def redis_server() -> Iterator[int]:
    """A private redis-server on loopback (a free port, no persistence), stopped afterwards; yields
    its port."""
    import redis

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on PATH (apt-get install redis-server), or pass --no-redis")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="nd-redis-") as tmp:
        cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        cmd += ["--dir", tmp, "--logfile", str(Path(tmp) / "redis.log")]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = redis.Redis(host="127.0.0.1", port=port)
            deadline = time.monotonic() + 10
            while True:
                try:
                    client.ping()
                    break
                except redis.exceptions.ConnectionError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"redis-server did not start on port {port}") from None
                    time.sleep(0.05)
            client.close()
            yield port
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
