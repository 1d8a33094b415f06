"""schemathesis against the served OpenAPI schema: no server error, no answer off its schema.

Every operation is called with generated input, as member alice (the SSE streams, which
never end, are left to test_events). Examples are limited so that the run stays short.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from .conftest import Api


def test_no_server_error_and_no_answer_off_the_schema(api: Api) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    headers = {"Authorization": f"Bearer {api.tokens['alice']}"}
    checked = []
    calls: list[int] = []
    for found in schema.get_all_operations():
        operation = found.ok()
        if operation.path.endswith("/events"):
            continue
        checked.append(f"{operation.method.upper()} {operation.path}")

        @given(case=operation.as_strategy())
        @settings(
            max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def call(case: schemathesis.Case) -> None:
            calls.append(1)
            case.call_and_validate(
                headers=headers, checks=[not_a_server_error, response_schema_conformance]
            )

        call()
    assert len(checked) == 11, checked
    assert len(calls) > 2 * len(checked)  # generated cases did reach the server
