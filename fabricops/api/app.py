"""The FastAPI application: ``create_app(context)``.

Routes: ``/api/v1/...`` for the fabric, incidents and actions, ``/health``,
``/ready``, ``/metrics``; the OpenAPI document at ``/openapi.json`` and its
pages at ``/docs``. A store that fails answers 503 naming the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response, status
from fastapi.responses import JSONResponse

from fabricops import __version__
from fabricops.api import routes_fabric, routes_incidents, routes_ops
from fabricops.api.auth import MUTATING, refusal
from fabricops.api.context import ApiContext
from fabricops.store.store import StoreError

API_PREFIX = "/api/v1"


def create_app(ctx: ApiContext) -> FastAPI:
    """An app serving ``ctx``; inert until a server runs it."""
    app = FastAPI(
        title="fabricops",
        version=__version__,
        summary="Telemetry and automated operations for RoCE fabrics",
        description="Reads are open; calls that change something need "
                    "`Authorization: Bearer <token>`.",
    )
    app.state.ctx = ctx
    app.include_router(routes_fabric.router, prefix=API_PREFIX)
    app.include_router(routes_incidents.router, prefix=API_PREFIX)
    app.include_router(routes_ops.router)

    @app.middleware("http")
    async def mutations_need_the_token(request: Request,
                                       call_next: Callable[[Request], Awaitable[Response]],
                                       ) -> Response:
        if request.method in MUTATING:
            refused = refusal(ctx, request.headers.get("authorization"))
            if refused is not None:
                return JSONResponse({"detail": refused.detail}, status_code=refused.status_code,
                                    headers=refused.headers)
        return await call_next(request)

    @app.exception_handler(StoreError)
    async def store_failed(_: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)},
                            status_code=status.HTTP_503_SERVICE_UNAVAILABLE)

    return app
