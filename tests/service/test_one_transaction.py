"""An HTTP add is one transaction, however many documents it holds."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import psycopg_url
from tests.service.conftest import Service

pytestmark = pytest.mark.distributed_variant

# More than the size from which Index.add ramps its first batches up (ingest.reading.RAMP_FROM).
LARGE = 10_000


def _writes(database_url: str, schema: str, name: str) -> int:
    """The collection's write counter: it moves once for each committed batch."""
    with psycopg.connect(psycopg_url(database_url)) as conn:
        row = conn.execute(f'SELECT writes FROM "{schema}".collections WHERE name = %s', (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_large_request_commits_once(service: Service, database_url: str, schema: str) -> None:
    name = "one-transaction"
    admin = service.client(service.tokens["admin"])
    assert admin.post("/v1/collections", json={"name": name, "exist_ok": True}).status_code == 201
    before = _writes(database_url, schema, name)
    docs = [
        {"id": f"r{i}", "text": f"record {i} of the large request, topic {i % 997}"} for i in range(LARGE)
    ]
    r = admin.post(f"/v1/collections/{name}/documents", json=docs)
    assert r.status_code == 200, r.text
    assert r.json()["added"] == LARGE
    assert _writes(database_url, schema, name) == before + 1
