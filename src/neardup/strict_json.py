"""JSON read strictly: an object that names one key twice is refused, for files and request bodies alike.

JSON leaves open which of two values of one key counts (Python's ``json`` keeps the last, other
parsers the first), so neither is taken silently: a client's mistake, or a value smuggled past a
check that read the other one, would go unnoticed.
"""

from __future__ import annotations

import json
from typing import Any


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice (``key``: that key)."""

    def __init__(self, key: str) -> None:
        """The repeated ``key``."""
        super().__init__(f"the key {key!r:.80} appears twice in one object")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members as a dict (an ``object_pairs_hook``), or DuplicateKeyError."""
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return result


def loads(text: str | bytes) -> Any:
    """``json.loads`` refusing an object that repeats a key (DuplicateKeyError, a ValueError)."""
    return json.loads(text, object_pairs_hook=unique_keys)
