"""The fabric as fabricops knows it: topology, devices, series and key events."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel, Field

from fabricops.api.auth import Ctx
from fabricops.api.diagnose import neighbours
from fabricops.core.records import Event, EventKind
from fabricops.core.topology import Topology
from fabricops.pipeline.query import QueryError, read_series

router = APIRouter(tags=["fabric"])

MAX_NS = 2**63 - 1
StartNs = Annotated[int | None, Query(ge=0, le=MAX_NS, description=(
    "Range start, ns since the Unix epoch (default: now - since_s)"))]
EndNs = Annotated[int | None, Query(ge=0, le=MAX_NS, description="Range end (default: now)")]
SinceS = Annotated[float, Query(ge=0, le=10 * 365 * 86400, description=(
    "Without start_ns, how many seconds back from the end the range starts"))]
Limit = Annotated[int, Query(ge=1, le=10_000, description="At most this many")]


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


def window(start_ns: int | None, end_ns: int | None, since_s: float) -> tuple[int, int]:
    """[t0, t1] in ns from the query's range parameters; 400 if it is empty."""
    t1 = time.time_ns() if end_ns is None else end_ns
    t0 = max(0, t1 - int(since_s * 1e9)) if start_ns is None else start_ns
    if t1 < t0:
        raise HTTPException(status.HTTP_400_BAD_REQUEST,
                            f"empty range: end_ns {t1} is before start_ns {t0}")
    return t0, t1


def _topology(ctx: Ctx) -> Topology:
    if ctx.topology is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND,
                            "no topology is loaded (start the API with --topology FILE)")
    return ctx.topology


@router.get("/topology", summary="The fabric's topology document")
def topology(ctx: Ctx) -> dict[str, Any]:
    return _topology(ctx).model_dump(mode="json")


@router.get("/devices", summary="Every switch and host")
def devices(ctx: Ctx, role: Annotated[str | None, Query(max_length=16, description=(
        "Only this role: host, leaf, spine, agg, core, switch"))] = None) -> list[DeviceBrief]:
    topo = _topology(ctx)
    return [DeviceBrief(id=n.id, role=n.role.value, pod=n.pod, rail=n.rail, ports=len(n.ports))
            for n in topo.nodes if role is None or n.role.value == role]


@router.get("/devices/{device}", summary="One device with its ports and neighbours")
def device(ctx: Ctx, device: str) -> Device:
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


@router.get("/series", summary="One metric of one entity over a time range")
def series(ctx: Ctx,
           entity: Annotated[str, Query(min_length=1, max_length=255,
                                        description="Port, NIC or device, e.g. leaf-3:eth56")],
           metric: Annotated[str, Query(min_length=1, max_length=64,
                                        description="Catalogue metric name, e.g. out_octets")],
           rate: Annotated[bool, Query(description="Per-second rate of a counter")] = False,
           start_ns: StartNs = None, end_ns: EndNs = None, since_s: SinceS = 300.0,
           ) -> SeriesAnswer:
    t0, t1 = window(start_ns, end_ns, since_s)
    try:
        data = read_series(ctx.stored(), entity=entity, metric=metric, t0_ns=t0, t1_ns=t1,
                           rate=rate)
    except QueryError as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, str(exc)) from None
    n = len(data.ts_ns)
    keep = min(n, ctx.config.max_points)
    ts = data.ts_ns[n - keep:].tolist()
    values = data.values[n - keep:].astype(float).tolist()
    return SeriesAnswer(entity=entity, metric=metric, kind=data.kind.value, source=data.source,
                        rate=rate, max_error=data.max_error, truncated=keep < n,
                        points=[(t, v if math.isfinite(v) else None)
                                for t, v in zip(ts, values, strict=True)])


@router.get("/events", summary="Key events the pipeline extracted, oldest first")
def events(ctx: Ctx, start_ns: StartNs = None, end_ns: EndNs = None, since_s: SinceS = 3600.0,
           device: Annotated[str | None, Query(max_length=255)] = None,
           entity: Annotated[str | None, Query(max_length=255)] = None,
           metric: Annotated[str | None, Query(max_length=64)] = None,
           kind: EventKind | None = None, limit: Limit = 1000) -> list[Event]:
    t0, t1 = window(start_ns, end_ns, since_s)
    return ctx.stored().events(t0_ns=t0, t1_ns=t1, devices=[device] if device else None,
                            entities=[entity] if entity else None, metric=metric, kind=kind,
                            limit=limit)
