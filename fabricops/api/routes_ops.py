"""Liveness, readiness, Prometheus metrics, and fault injection on a simulated fabric."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabricops.api.auth import Authorized, Ctx
from fabricops.api.context import FaultRequest

router = APIRouter()


@router.get("/health", tags=["operations"], summary="The process answers")
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", tags=["operations"], summary="The store answers and every part is up",
            responses={503: {"description": "Some part is not ready; the body says which"}})
def ready(ctx: Ctx) -> JSONResponse:
    """200 when every check passes, else 503; the body lists each check with its detail.

    Checks: ``store`` (a read answers), each of ``ctx.checks``, and ``worker:<name>``
    for every worker in the process's liveness book (failing once it gave up, with
    its reason)."""
    results: dict[str, dict[str, Any]] = {}
    if ctx.store is not None:
        try:
            ctx.store.latest_diagnoses(limit=1)
            results["store"] = {"ok": True, "detail": ctx.store.url}
        except Exception as exc:
            results["store"] = {"ok": False, "detail": str(exc)}
    for name, check in ctx.checks.items():
        try:
            ok, detail = check()
        except Exception as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        results[name] = {"ok": ok, "detail": detail}
    if ctx.liveness is not None:
        for worker in ctx.liveness.states():
            results[f"worker:{worker.name}"] = {
                "ok": worker.alive, "detail": "running" if worker.alive else worker.reason}
    all_ok = all(r["ok"] for r in results.values())
    return JSONResponse({"ready": all_ok, "checks": results},
                        status_code=200 if all_ok else status.HTTP_503_SERVICE_UNAVAILABLE)


@router.get("/metrics", tags=["operations"], summary="Prometheus metrics of this process",
            response_class=Response)
def metrics(ctx: Ctx) -> Response:
    return Response(generate_latest(ctx.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/api/v1/sim/faults", tags=["simulation"], dependencies=[Authorized],
             status_code=status.HTTP_201_CREATED,
             summary="Inject a fault into the simulated fabric, starting now",
             responses={404: {"description": "The fabric is not simulated"},
                        422: {"description": "The fault cannot be injected as asked"}})
def inject(ctx: Ctx, request: FaultRequest) -> dict[str, Any]:
    if ctx.injector is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            "this fabricops is not running a simulated fabric")
    try:
        return dict(ctx.injector.inject(request))
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
