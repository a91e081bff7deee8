"""Liveness, readiness, Prometheus metrics, and fault injection on a simulated fabric."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Response, status
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabricops.api.auth import REFUSALS, Authorized, Ctx
from fabricops.api.context import FaultRequest
from fabricops.api.problems import NotReady, Readiness, ReadinessCheck, answer, described, reason

router = APIRouter()


@router.get("/health", tags=["operations"], summary="The process answers")
def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/ready", tags=["operations"], summary="The store answers and every part is up",
            response_model=Readiness,
            responses=described({503: "Some part is not ready; checks says which"}, NotReady))
def ready(ctx: Ctx) -> JSONResponse:
    """200 when every check passes, else 503 (problem details naming the failing checks);
    both list each check with its detail.

    Checks: ``store`` (a read answers), each of ``ctx.checks``, and ``worker:<name>``
    for every worker in the process's liveness book (failing once it gave up, with
    its reason)."""
    checks: dict[str, ReadinessCheck] = {}
    if ctx.store is not None:
        try:
            ctx.store.latest_diagnoses(limit=1)
            checks["store"] = ReadinessCheck(ok=True, detail=ctx.store.url)
        except Exception as exc:
            checks["store"] = ReadinessCheck(ok=False, detail=str(exc))
    for name, check in ctx.checks.items():
        try:
            ok, detail = check()
        except Exception as exc:
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        checks[name] = ReadinessCheck(ok=ok, detail=detail)
    if ctx.liveness is not None:
        for worker in ctx.liveness.states():
            checks[f"worker:{worker.name}"] = ReadinessCheck(
                ok=worker.alive, detail="running" if worker.alive else worker.reason)
    failing = [f"{name} ({c.detail})" for name, c in checks.items() if not c.ok]
    if not failing:
        return JSONResponse(Readiness(ready=True, checks=checks).model_dump(mode="json"))
    unavailable = status.HTTP_503_SERVICE_UNAVAILABLE
    return answer(NotReady(type="about:blank", title=reason(unavailable),
                           status=unavailable, detail="not ready: " + "; ".join(failing),
                           ready=False, checks=checks))


@router.get("/metrics", tags=["operations"], summary="Prometheus metrics of this process",
            response_class=PlainTextResponse)
def metrics(ctx: Ctx) -> Response:
    return Response(generate_latest(ctx.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/api/v1/sim/faults", tags=["simulation"], dependencies=[Authorized],
             status_code=status.HTTP_201_CREATED,
             summary="Inject a fault into the simulated fabric, starting now",
             responses={**REFUSALS, **described({
                 404: "The fabric is not simulated",
                 422: "The request is invalid, or the fault cannot be injected as asked "
                      "(an unknown entity, a wrong kind, a bad parameter)"})})
def inject(ctx: Ctx, request: FaultRequest) -> dict[str, Any]:
    if ctx.injector is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            "this fabricops is not running a simulated fabric")
    try:
        return dict(ctx.injector.inject(request))
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
