"""What every request of one service process shares: the database, open indexes, settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from neardup.service.pools import IndexPool
from neardup.storage.names import DEFAULT_SCHEMA
from neardup.storage.pool import ConnectionPool

# Request bodies above this size get 413 (`neardup serve --max-body-bytes`).
DEFAULT_MAX_BODY = 32 * 1024 * 1024


@dataclass
class Settings:
    """How ``neardup serve`` was started."""

    url: str
    schema: str = DEFAULT_SCHEMA
    auth: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY
    session_seconds: int = 8 * 3600


@dataclass
class Context:
    """The settings, a pool of plain connections and a pool of open indexes."""

    settings: Settings
    db: ConnectionPool = field(init=False)
    indexes: IndexPool = field(init=False)

    def __post_init__(self) -> None:
        self.db = ConnectionPool(self.settings.url, self.settings.schema)
        self.indexes = IndexPool(self.settings.url, self.settings.schema)

    @property
    def auth(self) -> bool:
        """Whether requests need a token."""
        return self.settings.auth

    def close(self) -> None:
        """Close the pooled connections and indexes."""
        self.indexes.close()
        self.db.close()
