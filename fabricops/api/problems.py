"""Errors as RFC 9457 problem details (``application/problem+json``).

Every error the API answers carries ``type``, ``title``, ``status`` and ``detail``:
``type`` is ``about:blank`` (the status code says what kind of problem it is),
``title`` the status's reason phrase and ``detail`` one line naming the target and
the cause. A request that fails validation (422) adds ``errors``, one entry per
offending input. Routes declare the problems they can answer with ``problems``;
``declare_problems`` completes the OpenAPI document with the schemas and with the
422 of every operation that takes input.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from fabricops.store.store import StoreError

PROBLEM_JSON = "application/problem+json"
_REF = "#/components/schemas/{model}"
#: RFC 9110's names where Python before 3.13 still has RFC 7231's.
_RENAMED = {413: "Content Too Large", 422: "Unprocessable Content"}


def reason(status: int) -> str:
    """The reason phrase of ``status`` as RFC 9110 names it: a problem's ``title``."""
    return _RENAMED.get(status) or HTTPStatus(status).phrase


class InvalidInput(BaseModel):
    """One input a request got wrong."""

    model_config = ConfigDict(frozen=True)

    field: str = Field(description="Where: the location and the name, e.g. query.limit, "
                                   "body.params.loss_rate")
    message: str = Field(description="What is wrong with it")


class Problem(BaseModel):
    """RFC 9457 problem details: the body of every error answer."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(description=(
        "A URI reference naming the kind of problem; about:blank: the status code says it"))
    title: str = Field(description="The status code's reason phrase")
    status: int = Field(ge=400, le=599, description="The HTTP status code of this answer")
    detail: str = Field(description="This occurrence: what was asked and why it failed")
    errors: list[InvalidInput] | None = Field(default=None, description=(
        "For 422 on invalid input: each input that is wrong"))


class ReadinessCheck(BaseModel):
    """One readiness check."""

    ok: bool
    detail: str = Field(description="The part's address when it answers, else why not")


class Readiness(BaseModel):
    """Every readiness check by name: ``store``, the process's probes, ``worker:<name>``."""

    ready: bool
    checks: dict[str, ReadinessCheck]


class NotReady(Problem):
    """A 503 from ``/ready``: the problem details plus every check."""

    ready: bool = Field(description="Always false")
    checks: dict[str, ReadinessCheck]


def problem(status: int, detail: str, *, headers: Mapping[str, str] | None = None,
            errors: Sequence[InvalidInput] | None = None) -> JSONResponse:
    """An ``application/problem+json`` answer with ``status`` and ``detail``."""
    return answer(Problem(type="about:blank", title=reason(status), status=status,
                          detail=detail, errors=list(errors) if errors is not None else None),
                  headers=headers)


def answer(body: Problem, *, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """``body`` as an ``application/problem+json`` answer with its status."""
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=body.status,
                        headers=dict(headers or {}), media_type=PROBLEM_JSON)


#: What each status means on this API when a route does not say better.
DESCRIPTIONS = {
    400: "The body cannot be read: it is not text in UTF-8",
    401: "The call changes something and carries no bearer token, or not the API's",
    403: "This API was started without a token: it refuses every mutation",
    404: "The thing asked for is not there",
    409: "The current state does not allow this",
    422: "The request does not match this operation's parameters or body",
    503: "The store does not answer, or this process keeps none",
}

_WWW_AUTHENTICATE = {"WWW-Authenticate": {
    "description": "Bearer: send Authorization: Bearer <token>", "required": True,
    "schema": {"type": "string"}}}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that can answer ``statuses`` as problem details."""
    return described({s: DESCRIPTIONS[s] for s in statuses})


def described(descriptions: Mapping[int, str], model: type[Problem] = Problem,
              ) -> dict[int | str, dict[str, Any]]:
    """Like ``problems``, with this route's own description of each status; ``model`` is
    the body's schema (a Problem, or one with more members)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status, text in descriptions.items():
        out[status] = {"description": text, "content": {PROBLEM_JSON: {"schema": {
            "$ref": _REF.format(model=model.__name__)}}}}
        if status == 401:
            out[status]["headers"] = _WWW_AUTHENTICATE
    return out


def declare_problems(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (an OpenAPI document FastAPI built) with the problem schemas, the 422 of
    each operation that takes input answered as problem details, and the 400 of each
    that takes a body (FastAPI's answer to one it cannot decode). Idempotent."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for model in (Problem, NotReady):
        schema = model.model_json_schema(ref_template=_REF, mode="serialization")
        for name, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(name, definition)
        schemas[model.__name__] = schema
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            invalid = operation.get("responses", {}).get("422")
            if invalid is not None and PROBLEM_JSON not in invalid.get("content", {}):
                operation["responses"]["422"] = described({422: DESCRIPTIONS[422]})[422]
            if "requestBody" in operation and "400" not in operation["responses"]:
                operation["responses"]["400"] = described({400: DESCRIPTIONS[400]})[400]
            operation["responses"] = dict(sorted(operation.get("responses", {}).items()))
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    return doc


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as problem details."""
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(StoreError, _store_failed)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _crashed)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    phrase = reason(exc.status_code)
    detail = str(exc.detail)
    if detail in (phrase, HTTPStatus(exc.status_code).phrase):
        detail = f"{request.method} {request.url.path}: {phrase.lower()}"
    return problem(exc.status_code, detail, headers=exc.headers)


async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [InvalidInput(field=".".join(str(p) for p in e.get("loc", ())),
                           message=_one_line(_message(e))) for e in exc.errors()]
    detail = "; ".join(f"{e.field}: {e.message}" for e in errors) or "invalid request"
    return problem(422, detail, errors=errors)


async def _store_failed(_: Request, exc: StoreError) -> JSONResponse:
    return problem(503, _one_line(str(exc)))


async def _crashed(request: Request, exc: Exception) -> JSONResponse:
    return problem(500, f"{request.method} {request.url.path} failed: {type(exc).__name__}")


def _message(error: Mapping[str, Any]) -> str:
    """Pydantic's message, without its "Value error, " before a validator's own words."""
    if error.get("type") == "value_error" and "error" in error.get("ctx", {}):
        return str(error["ctx"]["error"])
    return str(error.get("msg", "invalid"))


def _one_line(text: str) -> str:
    return " ".join(text.split())
