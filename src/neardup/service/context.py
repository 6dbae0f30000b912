"""What every request of one service process shares: the database, open indexes, settings."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread

from neardup.database import Database
from neardup.service.longpoll import DEFAULT_MAX_LONGPOLLS, Longpolls
from neardup.service.metrics import Metrics
from neardup.service.pools import IndexPool

# Request bodies above this size get 413 (`neardup serve --max-body-bytes`).
DEFAULT_MAX_BODY = 32 * 1024 * 1024


@dataclass
class Settings:
    """How ``neardup serve`` was started."""

    url: str
    schema: str
    auth: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY
    session_seconds: int = 8 * 3600
    max_longpolls: int = DEFAULT_MAX_LONGPOLLS
    log_format: str = "text"
    """``json``: one JSON line a request (and every other log line in JSON); ``text``: uvicorn's."""
    embedded_data_dir: str | None = None
    """The embedded server's data directory when it is the database (its state goes in /metrics)."""


# A token found valid is trusted this long without asking the database again: a revoked token
# is refused within this many seconds by every process (and at once by the one that revoked it).
TOKEN_CACHE_SECONDS = 2.0


class TokenCache:
    """Tokens found valid recently, by hash, each with the time it was checked."""

    def __init__(self, seconds: float = TOKEN_CACHE_SECONDS) -> None:
        """An empty cache whose entries last ``seconds``."""
        self._seconds = seconds
        self._entries: dict[bytes, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def recall(self, key: bytes) -> Any:
        """What was remembered for ``key``, if it is recent enough; else None."""
        found = self._entries.get(key)
        if found is None or time.monotonic() - found[0] > self._seconds:
            return None
        return found[1]

    def remember(self, key: bytes, value: Any) -> None:
        """Remember ``value`` for ``key`` from now on (old entries are dropped on the way)."""
        now = time.monotonic()
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries = {k: v for k, v in self._entries.items() if now - v[0] <= self._seconds}
            self._entries[key] = (now, value)

    def forget(self, key: bytes) -> None:
        """Forget ``key``."""
        with self._lock:
            self._entries.pop(key, None)


@dataclass
class Context:
    """The settings, the Database (its pooled connections shared by every request), a pool of
    open indexes, recent tokens, the longpolls waiting, and the figures /metrics shows."""

    settings: Settings
    db: Database = field(init=False)
    indexes: IndexPool = field(init=False)
    tokens: TokenCache = field(init=False)
    longpolls: Longpolls = field(init=False)
    metrics: Metrics = field(init=False)

    def __post_init__(self) -> None:
        self.db = Database(self.settings.url, self.settings.schema)
        self.indexes = IndexPool(self.db)
        self.tokens = TokenCache()
        self.longpolls = Longpolls(self.settings.max_longpolls)
        self.metrics = Metrics(self)

    def gauges(self) -> dict[str, float]:
        """The gauges /metrics shows (``metrics.GAUGES``), as they are now (on the event loop's
        thread: the worker threads' figures are read there)."""
        callbacks, connected = self.db.listening()
        in_use, idle = self.indexes.sizes()
        busy, limit, queued = self.threads()
        out = {
            "neardup_worker_pid": float(os.getpid()),
            "neardup_longpolls_waiting": self.longpolls.waiting,
            "neardup_longpolls_limit": self.longpolls.limit,
            "neardup_changes_listeners": callbacks,
            "neardup_changes_listener_connected": float(connected),
            "neardup_index_pool_in_use": in_use,
            "neardup_index_pool_idle": idle,
            "neardup_connection_pool_idle": self.db.idle(),
            "neardup_worker_threads_busy": busy,
            "neardup_worker_threads_limit": limit,
            "neardup_worker_threads_queued": queued,
        }
        embedded = self.embedded()
        if embedded is not None:
            out["neardup_embedded_server_running"] = float(embedded[0])
            out["neardup_embedded_server_in_use"] = float(embedded[1])
            out["neardup_embedded_server_idle_seconds"] = embedded[2]
        return {name: float(value) for name, value in out.items()}

    @staticmethod
    def threads() -> tuple[int, int, int]:
        """The worker threads running requests' work, how many may, and the requests waiting for
        one (on the event loop's thread only)."""
        stats = anyio.to_thread.current_default_thread_limiter().statistics()
        return stats.borrowed_tokens, int(stats.total_tokens), stats.tasks_waiting

    def embedded(self) -> tuple[bool, bool, float] | None:
        """Whether the embedded server runs, whether it is in use, and its idle seconds; None when
        the database is not the embedded server."""
        if self.settings.embedded_data_dir is None:
            return None
        from neardup.embedded.default_server import server_state

        state = server_state(Path(self.settings.embedded_data_dir))
        return state.running, state.in_use, state.idle_seconds or 0.0

    @property
    def auth(self) -> bool:
        """Whether requests need a token."""
        return self.settings.auth

    def close(self) -> None:
        """Close the pooled connections and indexes."""
        self.indexes.close()
        self.db.close()
