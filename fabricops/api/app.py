"""The FastAPI application: ``create_app(context)``.

Routes: ``/api/v1/...`` for the fabric, incidents and actions, ``/health``,
``/ready``, ``/metrics``; the OpenAPI document at ``/openapi.json`` and its
pages at ``/docs``. Every error is answered as RFC 9457 problem details (see
:mod:`fabricops.api.problems`) and declared in the document for each operation;
a store that fails answers 503 naming the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from starlette.routing import Match

from fabricops import __version__
from fabricops.api import problems, routes_fabric, routes_incidents, routes_ops
from fabricops.api.auth import MUTATING, refusal
from fabricops.api.context import ApiContext

API_PREFIX = "/api/v1"


class _Api(FastAPI):
    """FastAPI whose OpenAPI document declares the problem details of every operation."""

    def openapi(self) -> dict[str, Any]:
        return problems.declare_problems(super().openapi())


def create_app(ctx: ApiContext) -> FastAPI:
    """An app serving ``ctx``; inert until a server runs it."""
    app = _Api(
        title="fabricops",
        version=__version__,
        summary="Telemetry and automated operations for RoCE fabrics",
        description="Reads are open; calls that change something need "
                    "`Authorization: Bearer <token>`. Errors are RFC 9457 problem details "
                    "(`application/problem+json`).",
    )
    app.state.ctx = ctx
    app.include_router(routes_fabric.router, prefix=API_PREFIX)
    app.include_router(routes_incidents.router, prefix=API_PREFIX)
    app.include_router(routes_ops.router)
    problems.install(app)

    @app.middleware("http")
    async def mutations_need_the_token(request: Request,
                                       call_next: Callable[[Request], Awaitable[Response]],
                                       ) -> Response:
        if request.method in MUTATING and _routed(app, request):
            refused = refusal(ctx, request.headers.get("authorization"))
            if refused is not None:
                return problems.problem(refused.status_code, str(refused.detail),
                                        headers=refused.headers)
        return await call_next(request)

    return app


def _routed(app: FastAPI, request: Request) -> bool:
    """Whether a route of ``app`` takes ``request`` as it is (path and method)."""
    return any(route.matches(request.scope)[0] is Match.FULL for route in app.router.routes)
