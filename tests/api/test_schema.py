"""schemathesis against the served OpenAPI schema: no server error, no answer off its schema.

Every operation is called with generated input, as member alice and as admin bob (so the
admin-only operations get past their refusal), the SSE streams, which never end, left to
test_events. Examples are limited so that the run stays short.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from .conftest import Api
from .test_matrix import api_routes


def test_no_server_error_and_no_answer_off_the_schema(api: Api) -> None:
    schema = schemathesis.openapi.from_url(f"{api.url}/openapi.json")
    callers = [{"Authorization": f"Bearer {api.tokens[name]}"} for name in ("alice", "bob")]
    checked = []
    calls: list[int] = []
    for found in schema.get_all_operations():
        operation = found.ok()
        if operation.path.endswith("/events"):
            continue
        checked.append(f"{operation.method.upper()} {operation.path}")

        @given(case=operation.as_strategy())
        @settings(
            max_examples=8, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def call(case: schemathesis.Case) -> None:
            calls.append(1)
            for headers in callers:
                case.call_and_validate(
                    headers=headers, checks=[not_a_server_error, response_schema_conformance]
                )

        call()
    served = {f"{method} {path}" for method, path in api_routes(api)}
    assert set(checked) == {op for op in served if not op.endswith("/events")}
    assert len(calls) > 2 * len(checked)  # generated cases did reach the server
