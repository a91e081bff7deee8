"""The fabric as fabricops knows it: topology, devices, series and key events."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, status
from pydantic import AfterValidator, BaseModel, Field

from fabricops.api.auth import Ctx
from fabricops.api.diagnose import neighbours
from fabricops.api.problems import described, problems
from fabricops.core.catalogue import CATALOGUE, MetricKind, UnknownMetricError
from fabricops.core.records import Event, EventKind
from fabricops.core.topology import Topology
from fabricops.pipeline.query import QueryError, read_series

router = APIRouter(tags=["fabric"])

MAX_NS = 2**63 - 1
StartNs = Annotated[int | None, Query(ge=0, le=MAX_NS, description=(
    "Range start, ns since the Unix epoch (default: end - since_s)"))]
EndNs = Annotated[int | None, Query(ge=0, le=MAX_NS, description=(
    "Range end, ns since the Unix epoch (default: now); an end before the start is an "
    "empty range, which holds nothing"))]
SinceS = Annotated[float, Query(ge=0, le=10 * 365 * 86400, description=(
    "Without start_ns, how many seconds back from the end the range starts"))]
Limit = Annotated[int, Query(ge=1, le=10_000, description="At most this many")]

#: A route that reads the store can answer this.
STORE = problems(status.HTTP_503_SERVICE_UNAVAILABLE)
NO_TOPOLOGY = "No topology is loaded (the API was started without --topology)"


def _catalogued(name: str) -> str:
    try:
        return CATALOGUE.by_name(name).name
    except UnknownMetricError:
        raise ValueError(f"unknown metric {name!r}: not in the catalogue") from None


MetricName = Annotated[str, Query(max_length=64, json_schema_extra={"enum": [
    m.name for m in CATALOGUE.metrics]}, description="Catalogue metric name, e.g. out_octets"),
    AfterValidator(_catalogued)]


class DevicePort(BaseModel):
    port: str
    speed_bps: int
    peer: str | None
    link: str | None


class Device(BaseModel):
    id: str
    role: str
    pod: int | None
    rail: int | None
    neighbours: list[str]
    ports: list[DevicePort]


class DeviceBrief(BaseModel):
    id: str
    role: str
    pod: int | None
    rail: int | None
    ports: int


class SeriesAnswer(BaseModel):
    entity: str
    metric: str
    kind: str
    source: str | None
    rate: bool
    max_error: float
    truncated: bool
    points: list[tuple[int, float | None]] = Field(description=(
        "[ts_ns, value] pairs; a value that is not a finite number is null"))


def window(start_ns: int | None, end_ns: int | None, since_s: float) -> tuple[int, int] | None:
    """[t0, t1] in ns from the query's range parameters; None if the range is empty (its
    end before its start), which every route answers with nothing."""
    t1 = time.time_ns() if end_ns is None else end_ns
    t0 = max(0, t1 - int(since_s * 1e9)) if start_ns is None else start_ns
    return (t0, t1) if t0 <= t1 else None


def _topology(ctx: Ctx) -> Topology:
    if ctx.topology is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            "no topology is loaded (start the API with --topology FILE)")
    return ctx.topology


@router.get("/topology", summary="The fabric's topology document",
            responses=described({404: NO_TOPOLOGY}))
def topology(ctx: Ctx) -> dict[str, Any]:
    return _topology(ctx).model_dump(mode="json")


@router.get("/devices", summary="Every switch and host", responses=described({404: NO_TOPOLOGY}))
def devices(ctx: Ctx, role: Annotated[str | None, Query(max_length=16, description=(
        "Only this role: host, leaf, spine, agg, core, switch"))] = None) -> list[DeviceBrief]:
    topo = _topology(ctx)
    return [DeviceBrief(id=n.id, role=n.role.value, pod=n.pod, rail=n.rail, ports=len(n.ports))
            for n in topo.nodes if role is None or n.role.value == role]


@router.get("/devices/{device}", summary="One device with its ports and neighbours",
            responses=described({404: f"{NO_TOPOLOGY}, or it has no such device"}))
def device(ctx: Ctx, device: Annotated[str, Path(max_length=255, description=(
        "Device id, e.g. leaf-3"))]) -> Device:
    topo = _topology(ctx)
    node = topo.node_by_id.get(device)
    if node is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no device {device!r} in the topology")
    ports = []
    for p in node.ports:
        pid = f"{node.id}:{p.name}"
        peer = topo.peer_of.get(pid)
        ports.append(DevicePort(port=pid, speed_bps=p.speed_bps, peer=peer,
                                link=topo.link_of_port(pid) if peer else None))
    return Device(id=node.id, role=node.role.value, pod=node.pod, rail=node.rail,
                  neighbours=neighbours(topo, node.id), ports=ports)


@router.get("/series", summary="One metric of one entity over a time range",
            responses=STORE)
def series(ctx: Ctx,
           entity: Annotated[str, Query(min_length=1, max_length=255,
                                        description="Port, NIC or device, e.g. leaf-3:eth56")],
           metric: MetricName,
           rate: Annotated[bool, Query(description=(
               "Per-second rate of a counter; other kinds are answered as stored, and the "
               "answer's rate says false"))] = False,
           start_ns: StartNs = None, end_ns: EndNs = None, since_s: SinceS = 300.0,
           ) -> SeriesAnswer:
    """The points of ``metric`` of ``entity`` in the range, at most ``max_points`` (the
    newest; ``truncated`` says so). Nothing stored, or an empty range: no points."""
    store = ctx.stored()
    kind = CATALOGUE.by_name(metric).kind
    rate = rate and kind is MetricKind.COUNTER
    span = window(start_ns, end_ns, since_s)
    if span is None:
        return SeriesAnswer(entity=entity, metric=metric, kind=kind.value, source=None,
                            rate=rate, max_error=0.0, truncated=False, points=[])
    try:
        data = read_series(store, entity=entity, metric=metric, t0_ns=span[0],
                           t1_ns=span[1], rate=rate)
    except QueryError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    n = len(data.ts_ns)
    keep = min(n, ctx.config.max_points)
    ts = data.ts_ns[n - keep:].tolist()
    values = data.values[n - keep:].astype(float).tolist()
    return SeriesAnswer(entity=entity, metric=metric, kind=data.kind.value, source=data.source,
                        rate=rate, max_error=data.max_error, truncated=keep < n,
                        points=[(t, v if math.isfinite(v) else None)
                                for t, v in zip(ts, values, strict=True)])


@router.get("/events", summary="Key events the pipeline extracted, oldest first",
            responses=STORE)
def events(ctx: Ctx, start_ns: StartNs = None, end_ns: EndNs = None, since_s: SinceS = 3600.0,
           device: Annotated[str | None, Query(max_length=255)] = None,
           entity: Annotated[str | None, Query(max_length=255)] = None,
           metric: Annotated[str | None, Query(max_length=64)] = None,
           kind: EventKind | None = None, limit: Limit = 1000) -> list[Event]:
    store = ctx.stored()
    span = window(start_ns, end_ns, since_s)
    if span is None:
        return []
    return store.events(t0_ns=span[0], t1_ns=span[1], devices=[device] if device else None,
                        entities=[entity] if entity else None, metric=metric, kind=kind,
                        limit=limit)
