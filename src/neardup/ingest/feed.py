"""What one writing transaction tells the collection's changes feed, when it keeps one.

The writer calls ``begin`` once it holds the collection's lock (with the ids it writes or
removes), reports cluster merges and splits as it relabels clusters, and calls ``end`` before it
commits; ``storage.changes`` turns that into numbered changes. A collection without the feed costs
a test of a flag its locked row carries anyway: nothing is read or written for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from neardup.core.cluster_ids import ClusterChanges
from neardup.storage import changes
from neardup.storage.catalog import CollectionRow
from neardup.storage.scope import Scope


class Feed:
    """One transaction's record of its changes: off until ``begin`` finds the feed on."""

    def __init__(self) -> None:
        self.on = False
        self.rebuilding = False
        """A rebuild records every pair's change once at its end; its batches record nothing."""
        self._row: CollectionRow | None = None
        self._merged: tuple[list[int], list[int]] = ([], [])
        self._split: tuple[list[int], list[int]] = ([], [])

    def begin(self, scope: Scope, row: CollectionRow, external_ids: Sequence[str]) -> None:
        """Under the lock, before the transaction writes or removes the documents ``external_ids``."""
        if self.rebuilding or not row.change_feed:
            return
        self.on, self._row = True, row
        changes.touch(scope, external_ids)

    def begin_rebuild(self, scope: Scope, row: CollectionRow) -> None:
        """Under the lock, before a rebuild changes any pair."""
        if row.change_feed:
            self.on, self.rebuilding, self._row = True, True, row
            changes.touch(scope, None)

    def clusters_changed(self, decided: ClusterChanges) -> None:
        """The merges and splits ``store.settle_clusters`` decided: each absorbed id merged into its
        survivor, each split id into its parts."""
        if not self.on or self.rebuilding:
            return
        for survivor, absorbed in decided.merged:
            self._merged[0].extend(absorbed)
            self._merged[1].extend([survivor] * len(absorbed))
        for old, parts in decided.split:
            self._split[0].extend([old] * len(parts))
            self._split[1].extend(parts)

    def end(self, scope: Scope, *, rebuild: bool = False) -> None:
        """Before the commit: number and store the changes, and drop those past retention. A
        rebuild's batches pass (``rebuild`` False while rebuilding); the rebuild's end records."""
        if not self.on or self._row is None or self.rebuilding != rebuild:
            return
        changes.record(scope, rebuilt=rebuild, merged=self._merged, split=self._split)
        if self._row.change_retention is not None:
            changes.prune(scope, self._row.change_retention)
        self.on = self.rebuilding = False
