"""What a writer's steps are given: the batch's connection and collection (``BatchContext``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from neardup.config import IndexConfig
from neardup.core.sketch import Sketcher
from neardup.ingest.feed import Feed
from neardup.storage.connections import Connections, on
from neardup.storage.scope import Scope


@dataclass(frozen=True)
class BatchContext:
    """One transaction's view of the collection: ``scope`` is on the connection whose transaction
    writes (the writer's own, or the spare one a batch was written ahead on); ``second`` gives the
    collection on the second connection, which reads what is committed meanwhile."""

    scope: Scope
    second: Callable[[], Scope]
    name: str
    config: IndexConfig
    sketcher: Sketcher
    feed: Feed = field(default_factory=Feed)
    """What the transaction tells the changes feed (nothing unless the collection keeps one)."""


__all__ = ["BatchContext", "Connections", "on"]
