"""Property-based test of the OpenAPI schema (schemathesis): whatever a client sends,
the API answers without a server error, and no mutation passes without the token."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from fabricops.api.app import create_app
from fabricops.api.context import ApiContext
from fabricops.core.actions import ActionState
from fabricops.store.store import Store
from tests.api.conftest import drain_for, gray_link


@pytest.fixture
def api_schema(ctx: ApiContext, api_store: Store) -> schemathesis.BaseSchema:
    d = gray_link()
    api_store.put_diagnoses([d])
    api_store.put_action(drain_for(d, ActionState.APPLIED))
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(ctx))


schema = schemathesis.pytest.from_fixture("api_schema")

MUTATIONS = {"POST", "PUT", "PATCH", "DELETE"}


def _send(case: schemathesis.Case) -> httpx.Response:
    """Send the case through Starlette's test client (an httpx client on the ASGI app)."""
    kwargs = case.as_transport_kwargs(base_url="http://testserver")
    headers = dict(kwargs.get("headers") or {})
    if kwargs.get("cookies"):
        headers["cookie"] = "; ".join(f"{k}={v}" for k, v in kwargs["cookies"].items())
    app = case.operation.schema.app
    with TestClient(app, raise_server_exceptions=False) as client:
        return client.request(kwargs["method"], kwargs["url"], params=kwargs.get("params"),
                              headers=headers, json=kwargs.get("json"),
                              content=kwargs.get("data"))


@schema.parametrize()
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_no_server_errors_and_no_unauthenticated_mutation(case: schemathesis.Case) -> None:
    headers = {k.lower(): v for k, v in (case.headers or {}).items()}
    headers.pop("authorization", None)
    case.headers = headers
    response = _send(case)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: " \
                                       f"{response.status_code} {response.text[:300]}"
    declared = case.operation.method.upper()
    if declared in MUTATIONS and case.method.upper() == declared:
        assert response.status_code in (401, 403), \
            f"{case.method} {case.formatted_path} without a token got {response.status_code}"
