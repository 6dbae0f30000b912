"""Hooks tests put on the writer to see what it did."""

from __future__ import annotations

import pytest

from neardup.ingest.plan import BatchPlan
from neardup.ingest.writer import Writer


def count_withdrawals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many contents written before the turn each batch withdraws."""
    calls: list[int] = []
    withdraw = Writer._withdraw

    def counting(self: Writer, content_ids: list[int], written: BatchPlan, with_rows: bool) -> None:
        calls.append(len(content_ids))
        withdraw(self, content_ids, written, with_rows)

    monkeypatch.setattr(Writer, "_withdraw", counting)
    return calls
