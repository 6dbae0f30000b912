"""Fuzzing from the service's own OpenAPI document (schemathesis strategies driven by hypothesis):
no request, valid for the schema or not, gets a 5xx, and every error is a problem document.

Schemathesis' own pytest plugin does not run under pytest 9 yet, so the cases come from each
operation's ``as_strategy()`` and the test drives them with ``hypothesis.given``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.core.result import Ok

from tests.service.conftest import Service

pytestmark = pytest.mark.distributed_variant

# Examples per operation and generation mode: enough to reach each parser's branches in bounded time.
EXAMPLES = 25


@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])
def test_no_request_gets_a_server_error(service: Service, mode: schemathesis.GenerationMode) -> None:
    token = service.tokens["admin"]
    with service.client(token) as c:  # a collection the generated paths may name
        c.post("/v1/collections", json={"name": "api-fuzz", "threshold": 0.5, "exist_ok": True})
        c.post("/v1/collections/fuzz/documents", json=[{"id": "a", "text": "some text to find"}])
    schema = schemathesis.openapi.from_url(f"{service.base}/openapi.json")
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), results  # the document is valid OpenAPI
    operations = [r.ok() for r in results if isinstance(r, Ok)]
    assert len(operations) >= 13
    statuses: Counter[int] = Counter()

    for operation in operations:
        # Half the cases name the existing collection, so the fuzzer gets past "no such collection".
        known = {"name": "api-fuzz"} if "{name}" in operation.path else None
        strategy = st.one_of(operation.as_strategy(mode), operation.as_strategy(mode, path_parameters=known))

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def call(case: schemathesis.Case[Any]) -> None:
            response = case.call(headers={"Authorization": f"Bearer {token}"}, timeout=60)
            statuses[response.status_code] += 1
            where = (case.method, case.formatted_path, case.query, case.body, response.text[:500])
            assert response.status_code < 500, where
            if response.status_code >= 400:
                assert response.headers["content-type"][0].startswith("application/problem+json"), where
                assert "Traceback" not in response.text

        try:
            call()
        except Unsatisfiable:  # nothing to make invalid (no parameters, no body): nothing to test
            assert mode == schemathesis.GenerationMode.NEGATIVE, operation.label
    # Not vacuous: successes and refusals both happened.
    assert sum(n for s, n in statuses.items() if s < 300) > 0, statuses
    assert sum(n for s, n in statuses.items() if 400 <= s < 500) > 0, statuses
