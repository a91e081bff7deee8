"""gNMI Get: the leaves a GetRequest's paths and data type select, as notifications.

The data types of the gNMI specification (3.3.1) over what the target serves:

- CONFIG, the read-write leaves: the running RoCE settings
  (:mod:`~fabricops.simulator.agents.gnmi_running`; UNIMPLEMENTED without a
  handler that carries them);
- STATE, every read-only leaf: the telemetry (counters, gauges, oper-status),
  LLDP and port facts (:mod:`~fabricops.simulator.agents.lldp`) and the ECMP
  hash fields in use (:mod:`~fabricops.simulator.agents.gnmi_set`);
- OPERATIONAL, the read-only leaves the device's operation and its neighbours
  produce: the telemetry and LLDP, not the hash state that mirrors configuration;
- ALL (the default): CONFIG and STATE together.

Each requested path gets one notification (3.3.2), stamped with the frame's timestamp and
carrying the request's prefix target and origin; a path with no data of the
type asked for is NOT_FOUND, naming it. The root path (no path at all) takes
in LLDP, and the hash state where the device has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.frame import Frame
from fabricops.core.openconfig import OcPath, format_path, matches, parse_path
from fabricops.simulator.agents.gnmi_encode import (
    JSON,
    LeafTable,
    encode_notification,
    get_response,
)
from fabricops.simulator.agents.gnmi_running import (
    may_hold_settings,
    serves_settings,
    settings_updates,
)
from fabricops.simulator.agents.gnmi_set import (
    HASH_STATE_LEAF,
    SetHandler,
    asks_for_hash,
    hash_notification,
)
from fabricops.simulator.agents.gnmi_stream import GnmiError, path_of
from fabricops.simulator.agents.gnmi_typed import ValueEncoder
from fabricops.simulator.agents.lldp import Cabling, asks_for_lldp, lldp_notification

ALL, CONFIG, STATE, OPERATIONAL = (gnmi_pb2.GetRequest.ALL, gnmi_pb2.GetRequest.CONFIG,
                                   gnmi_pb2.GetRequest.STATE, gnmi_pb2.GetRequest.OPERATIONAL)
_HASH_LEAF = parse_path(HASH_STATE_LEAF)


@dataclass(frozen=True)
class GetContext:
    """What a Get of one device is answered from, and how it is encoded."""

    device: str
    frame: Frame
    table: LeafTable
    prefix: bytes
    encoding: int
    encoder: ValueEncoder
    handler: SetHandler | None = None
    cabling: Cabling | None = None
    queue_name: str = "3"


def get_answer(request: Any, ctx: GetContext) -> bytes:
    """The serialized ``gnmi.GetResponse`` to ``request``; GnmiError names what is refused."""
    kind = request.type
    if kind not in (ALL, CONFIG, STATE, OPERATIONAL):
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {ctx.device!r}: GetRequest.type {kind} is not a gNMI data type")
    if kind == CONFIG and not serves_settings(ctx.handler):
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {ctx.device!r}: running configuration is not served")
    notes = [_notification(path_of(request.prefix, path), kind, ctx)
             for path in request.path or [gnmi_pb2.Path()]]
    return get_response(notes)


def _notification(pattern: OcPath, kind: int, ctx: GetContext) -> bytes:
    extra: list[Any] = []
    if kind in (ALL, CONFIG) and serves_settings(ctx.handler) and may_hold_settings(pattern):
        extra += settings_updates(pattern, ctx.device, ctx.encoding, ctx.handler,  # type: ignore[arg-type]
                                  ctx.queue_name)
    telemetry = b""
    if kind != CONFIG:
        telemetry, more = _state(pattern, kind, ctx, bool(extra))
        extra += more
    if not telemetry and not extra:
        raise GnmiError(grpc.StatusCode.NOT_FOUND, f"target {ctx.device!r}: path "
                        f"{format_path(pattern)} has no {_NAMES[kind]}")
    if telemetry:
        data: bytes = gnmi_pb2.Notification(update=extra).SerializeToString()
        return telemetry + data
    note = gnmi_pb2.Notification(timestamp=max(ctx.frame.ts_ns, 1), update=extra)
    if ctx.prefix:
        note.prefix.MergeFromString(ctx.prefix)
    data = note.SerializeToString()
    return data


_NAMES = {ALL: "data", CONFIG: "configuration data", STATE: "state data",
          OPERATIONAL: "operational data"}


def _state(pattern: OcPath, kind: int, ctx: GetContext,
           have_config: bool) -> tuple[bytes, list[Any]]:
    """(the encoded telemetry notification or b"", other read-only updates) of ``pattern``."""
    extra: list[Any] = []
    if asks_for_hash(pattern) or not pattern:
        extra += _hash(pattern, kind, ctx, quiet=have_config or not pattern)
    if ctx.cabling is not None and (asks_for_lldp(pattern) or not pattern):
        note = lldp_notification(ctx.cabling, pattern, ctx.device, ctx.frame.ts_ns,
                                 ctx.encoding != gnmi_pb2.PROTO)
        if note is not None:
            extra += _updates(note, ctx.encoding)
            if pattern:
                return b"", extra
    indices = ctx.table.select(pattern)
    if not len(indices):
        return b"", extra
    return encode_notification(ctx.table, ctx.frame.raw, indices, ctx.frame.ts_ns, ctx.prefix,
                               ctx.encoder), extra


def _hash(pattern: OcPath, kind: int, ctx: GetContext, quiet: bool) -> list[Any]:
    """The hash state update, if the type and pattern take it; with ``quiet`` a device
    without one (or a pattern beside it) gives none instead of an error."""
    if kind == OPERATIONAL or (quiet and not matches(pattern, _HASH_LEAF)):
        return []
    try:
        note = hash_notification(pattern, ctx.device, ctx.frame.ts_ns, ctx.encoding,
                                 ctx.handler)
    except GnmiError:
        if quiet:
            return []
        raise
    return _updates(note, ctx.encoding)


def _updates(note: bytes, encoding: int) -> list[Any]:
    """The updates of a serialized notification, JSON_IETF values turned JSON if asked."""
    updates = list(gnmi_pb2.Notification.FromString(note).update)
    if encoding == JSON:
        for u in updates:
            if u.val.WhichOneof("value") == "json_ietf_val":
                u.val.json_val = u.val.json_ietf_val
    return updates
