"""What one writing transaction tells the collection's changes feed, when it keeps one.

The writer calls ``begin`` once it holds the collection's lock (with the ids it writes or
removes), reports cluster merges and splits as it relabels clusters, and calls ``end`` before it
commits; ``storage.changes`` turns that into numbered changes. A collection without the feed costs
a test of a flag its locked row carries anyway: nothing is read or written for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neardup.storage import changes, contents
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

    def clusters_merged(self, old: np.ndarray, new: np.ndarray) -> None:
        """The clusters labelled ``old[i]`` were merged into ``new[i]``."""
        if self.on and not self.rebuilding:
            self._merged[0].extend(old.tolist())
            self._merged[1].extend(new.tolist())

    def clusters_relabelled(self, scope: Scope, members: Sequence[int], labels: Sequence[int]) -> None:
        """The contents ``members`` are about to be labelled ``labels`` (clusters recomputed after
        contents went): each cluster whose remaining contents change label split (into one or more)."""
        if not self.on or self.rebuilding:
            return
        before = contents.cluster_labels(scope, members)
        into: dict[int, set[int]] = {}
        for member, label in zip(members, labels, strict=True):
            into.setdefault(before[member], set()).add(int(label))
        for old, new in sorted(into.items()):
            if new != {old}:
                self._split[0].extend([old] * len(new))
                self._split[1].extend(sorted(new))

    def end(self, scope: Scope, *, rebuild: bool = False) -> None:
        """Before the commit: number and store the changes, and drop those past retention. A
        rebuild's batches pass (``rebuild`` False while rebuilding); the rebuild's end records."""
        if not self.on or self._row is None or self.rebuilding != rebuild:
            return
        changes.record(scope, rebuilt=rebuild, merged=self._merged, split=self._split)
        if self._row.change_retention is not None:
            changes.prune(scope, self._row.change_retention)
        self.on = self.rebuilding = False
