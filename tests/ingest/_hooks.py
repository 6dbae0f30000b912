"""Hooks tests put on the writer to see what it did."""

from __future__ import annotations

import pytest

from neardup.ingest import store
from neardup.ingest.context import BatchContext
from neardup.ingest.plan import BatchPlan


def count_withdrawals(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record how many contents written before the turn each batch withdraws."""
    calls: list[int] = []
    withdraw = store.withdraw

    def counting(ctx: BatchContext, content_ids: list[int], written: BatchPlan, with_rows: bool) -> None:
        calls.append(len(content_ids))
        withdraw(ctx, content_ids, written, with_rows)

    monkeypatch.setattr(store, "withdraw", counting)
    return calls
