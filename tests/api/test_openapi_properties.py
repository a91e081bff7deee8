"""Property-based test of the served OpenAPI document with every schemathesis check.

Three APIs are fuzzed: one with nothing behind it (no store, topology, injector or
token), and one over a seeded store, first without and then with its token, so
that mutations succeed and move the seeded actions. Each operation gets positive and
negative cases from schemathesis's public ``APIOperation.as_strategy`` under a plain
Hypothesis ``@given`` (its pytest plugin's ``from_fixture`` reaches into pytest's
private node attributes), some of the positive ones pinned to seeded rows, plus the
cases its coverage phase derives from the document (boundaries, missing parameters
and headers, undeclared methods). Every response goes through schemathesis's default
checks, which are all of its built-in checks; the test reports every distinct failure
with a curl that reproduces it, and counts the cases it sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import openapi_spec_validator
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from schemathesis.errors import FailureGroup

from fabricops.api.app import create_app
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.problems import PROBLEM_JSON
from fabricops.core.actions import ActionState
from fabricops.core.topology import Topology
from fabricops.store.store import Store
from tests.api.conftest import LINK, SEEDED_ACTIONS, TOKEN, TopologyInjector, seed
from tests.api.wsgi_face import WsgiFace

EXAMPLES = 24
"""Generated cases per operation, generation mode and API."""
MIN_CASES = 2000
SERIES = "GET /api/v1/series"

#: Exceptions to schemathesis's checks, each for the operations and check it names.
EXCEPTIONS = [
    # Schemathesis 4.32 rewrites a response schema's prefixItems into a draft-4 `items`
    # list, then validates with a Draft 2020-12 validator, which rejects that list as
    # an invalid schema. /series answers its [ts_ns, value] pairs as prefixItems (valid
    # OpenAPI 3.1), so its answers are validated against the document here instead
    # (see `_validate_series`).
    {"include-name": SERIES, "checks": {"response_schema_conformance": {"enabled": False}}},
    # The document cannot list the entities of the running topology nor the parameters
    # each fault takes; the simulator refuses those with a 422 naming the cause, which
    # the operation documents. These are schemathesis's expected statuses plus 422.
    {"include-name": "POST /api/v1/sim/faults", "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "422", "429",
                              "5xx"]}}},
]
#: For the API without a store only: every read of the store answers the documented 503
#: (this process keeps no store), which is what that API is fuzzed for; not_a_server_error
#: takes any 5xx for a crash.
STORELESS = {"include-path-regex": "^/api/v1/(series|events|diagnoses|diagnose|actions)",
             "checks": {"not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx",
                                                                     "503"]}}}


Operation = schemathesis.APIOperation[Any, Any, Any, Any]


@dataclass
class Fuzzed:
    """One API fuzzed: every operation, generated cases in both modes (some of the
    positive ones pinned to ``pinned``, overrides by path), then coverage cases, each
    sent with ``headers``; the cases sent and the distinct failures found."""

    name: str
    ctx: ApiContext
    headers: dict[str, str] | None = None
    pinned: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    cases: int = 0
    failures: dict[str, str] = field(default_factory=dict)

    def run(self) -> None:
        config = schemathesis.Config.from_dict({"operations": [
            *EXCEPTIONS, *([STORELESS] if self.ctx.store is None else [])]})
        with TestClient(create_app(self.ctx), raise_server_exceptions=False) as client:
            schema = schemathesis.openapi.from_wsgi("/openapi.json", WsgiFace(client),
                                                    config=config)
            for operation in _operations(schema):
                for mode in schemathesis.GenerationMode:
                    self._generate(operation, mode)
                for case in schema.iter_coverage_cases(
                        operation, generation_modes=list(schemathesis.GenerationMode),
                        generation_config=schema.config.generation_for(operation=operation)):
                    self.send(case)

    def _generate(self, operation: Operation, mode: schemathesis.GenerationMode) -> None:
        pins = self.pinned.get(operation.path, []) if mode.is_positive else []

        @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def generated(data: st.DataObject) -> None:
            pin = data.draw(st.sampled_from([{}, {}, *pins]) if pins else st.just({}))
            self.send(data.draw(operation.as_strategy(generation_mode=mode, **pin)))

        try:
            generated()
        except Unsatisfiable:
            assert mode.is_negative, f"{operation.label}: no positive case"

    def send(self, case: schemathesis.Case[Operation]) -> None:
        self.cases += 1
        try:
            response = case.call_and_validate(headers=self.headers)
        except FailureGroup as group:
            for failure in group.exceptions:
                self.failures.setdefault(f"{self.name}: {case.operation.label}: "
                                         f"{failure.title}", str(group))
            return
        if case.operation.label == SERIES and response.status_code == 200:
            _validate_series(case.operation.schema.raw_schema, response.json())
        if (case.method == case.operation.method.upper() != "GET" and self.headers is None
                and response.status_code < 300):
            self.failures.setdefault(f"{self.name}: {case.operation.label}: a mutation "
                                     f"passed without the token", str(case.body))


def _operations(schema: schemathesis.BaseSchema) -> list[Operation]:
    return [schema[path][method] for path, methods in schema.raw_schema["paths"].items()
            for method in methods]


def _validate_series(doc: dict[str, Any], body: Any) -> None:
    registry = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(doc))
    jsonschema.Draft202012Validator({"$ref": "urn:openapi#/components/schemas/SeriesAnswer"},
                                    registry=registry).validate(body)


def _pinned() -> dict[str, list[dict[str, Any]]]:
    """Seeded rows, by operation path, as overrides of generated cases."""
    actions = [{"path_parameters": {"action_id": a}} for a in SEEDED_ACTIONS]
    return {
        "/api/v1/devices/{device}": [{"path_parameters": {"device": d}}
                                     for d in ("leaf-0", "host-000", "spine-0")],
        "/api/v1/series": [{"query": {"entity": "leaf-0:eth1", "metric": m}}
                           for m in ("in_octets", "temperature_c", "oper_status")],
        "/api/v1/sim/faults": [{"body": {"type": "gray_loss", "entity": LINK,
                                         "params": {"loss_rate": 0.001}}}],
        **{f"/api/v1/actions/{{action_id}}{verb}": actions
           for verb in ("", "/approve", "/reject", "/rollback")},
    }


def test_every_check_passes_on_every_operation(api_store: Store, topology: Topology) -> None:
    seed(api_store)
    injector = TopologyInjector(topology)
    seeded = ApiContext(config=ApiConfig(token=TOKEN), store=api_store, topology=topology,
                        injector=injector)
    runs = [Fuzzed("bare API", ApiContext(config=ApiConfig())),
            Fuzzed("seeded, no token", seeded, pinned=_pinned()),
            Fuzzed("seeded, token", seeded, {"Authorization": f"Bearer {TOKEN}"}, _pinned())]
    for run in runs:
        run.run()
    counts = ", ".join(f"{r.name}: {r.cases}" for r in runs)
    failures = {key: report for r in runs for key, report in r.failures.items()}
    assert not failures, f"{len(failures)} failures in {counts}:\n\n" + "\n\n".join(
        f"== {key}\n{report}" for key, report in sorted(failures.items()))
    assert sum(r.cases for r in runs) >= MIN_CASES, f"too few cases: {counts}"
    assert injector.injected, "no fault was injected"
    decided = api_store.action("act-proposed")
    assert decided is not None
    assert decided.state is not ActionState.PROPOSED, "no decision was taken"
    print(f"schemathesis cases ({counts}) with 0 failures")


def test_the_served_document_is_valid_openapi(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    openapi_spec_validator.validate(doc)


def test_every_documented_error_is_a_problem(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    errors = [(f"{method.upper()} {path}", status, response)
              for path, operations in doc["paths"].items()
              for method, operation in operations.items()
              for status, response in operation["responses"].items() if int(status) >= 400]
    assert len(errors) > 30
    for label, status, response in errors:
        assert list(response["content"]) == [PROBLEM_JSON], f"{label} {status}"
        ref = response["content"][PROBLEM_JSON]["schema"]["$ref"]
        problem = schemas[ref.rsplit("/", 1)[-1]]
        assert {"type", "title", "status", "detail"} <= set(problem["required"]), \
            f"{label} {status}: {ref} is not problem details"
    assert "HTTPValidationError" not in schemas
