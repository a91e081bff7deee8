"""Property-based test of the OpenAPI schema (schemathesis): whatever a client sends,
the API answers without a server error, and no mutation passes without the token.

Cases come from schemathesis's public ``APIOperation.as_strategy`` under a plain
Hypothesis ``@given``, not from its pytest plugin's ``from_fixture``, which reaches
into pytest's private node attributes (pytest 9.2 removed ``Function._nodeid``).
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.core.actions import ActionState
from fabricops.store.store import Store
from tests.api.conftest import drain_for, gray_link

MUTATIONS = {"POST", "PUT", "PATCH", "DELETE"}
HTTP_METHODS = {"GET", "HEAD", "OPTIONS", *MUTATIONS}


def _labels() -> list[str]:
    """Every operation of the schema as "METHOD /path" (the app builds it without a store)."""
    paths = create_app(ApiContext(config=ApiConfig())).openapi()["paths"]
    return [f"{m.upper()} {p}" for p, ops in paths.items() for m in ops
            if m.upper() in HTTP_METHODS]


@pytest.fixture
def api_schema(ctx: ApiContext, api_store: Store) -> schemathesis.BaseSchema:
    d = gray_link()
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d, ActionState.APPLIED))
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(ctx))


def _send(client: TestClient, case: schemathesis.Case) -> httpx.Response:
    """Send the case through Starlette's test client (an httpx client on the ASGI app)."""
    kwargs = case.as_transport_kwargs(base_url="http://testserver")
    headers = dict(kwargs.get("headers") or {})
    if kwargs.get("cookies"):
        headers["cookie"] = "; ".join(f"{k}={v}" for k, v in kwargs["cookies"].items())
    return client.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                          headers=headers, json=kwargs.get("json"), content=kwargs.get("data"))


def _check(client: TestClient, case: schemathesis.Case) -> None:
    headers = {k.lower(): v for k, v in (case.headers or {}).items()}
    headers.pop("authorization", None)
    case.headers = headers
    response = _send(client, case)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: " \
                                       f"{response.status_code} {response.text[:300]}"
    declared = case.operation.method.upper()
    if declared in MUTATIONS and case.method.upper() == declared:
        assert response.status_code in (401, 403), \
            f"{case.method} {case.formatted_path} without a token got {response.status_code}"


@pytest.mark.parametrize("label", _labels())
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(data=st.data())
def test_no_server_errors_and_no_unauthenticated_mutation(
    api_schema: schemathesis.BaseSchema, label: str, data: st.DataObject,
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, f"{label} is not in the served schema"
    mode = data.draw(st.sampled_from(schemathesis.GenerationMode), label="generation mode")
    case = data.draw(operation.as_strategy(generation_mode=mode), label="case")
    with TestClient(api_schema.app, raise_server_exceptions=False) as client:
        _check(client, case)
