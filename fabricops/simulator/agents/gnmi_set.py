"""gNMI Set for remediation: enabling and disabling ports.

The only settable leaf is ``/interfaces/interface[name=IF]/config/enabled``
(``update`` or ``replace``; a bool, or JSON ``true``/``false``; or the
``config`` container with an ``enabled`` member). Requests are parsed here
(pure) and applied through a ``SetHandler``, so the target never touches the
simulator itself: ``DriverSetHandler`` applies them to a running simulation
between two ticks, ``RecordingSetHandler`` is the fake for tests.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.entities import port_id
from fabricops.core.frame import Frame
from fabricops.core.openconfig import OcPath, bare_name, format_path, schema_path
from fabricops.simulator.agents.driver import SimulationDriver
from fabricops.simulator.agents.gnmi_encode import gnmi_path
from fabricops.simulator.agents.gnmi_stream import GnmiError, path_of

ENABLED_LEAF = "/interfaces/interface/config/enabled"
CONFIG_CONTAINER = "/interfaces/interface/config"


class SetHandler(Protocol):
    """Applies a port's administrative state."""

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        """Enable or disable ``interface`` of ``device``; ValueError naming the port if not."""
        ...


@dataclass(frozen=True)
class PortChange:
    """One parsed Set operation: a port to enable or disable, and the path it came from."""

    interface: str
    enabled: bool
    path: OcPath
    op: int  # gnmi_pb2.UpdateResult.Operation


def parse_set(request: object, target: str) -> list[PortChange]:
    """The port changes of a ``gnmi.SetRequest``; GnmiError names what cannot be set."""
    if request.delete:  # type: ignore[attr-defined]
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {target!r}: Set delete is not supported")
    prefix = request.prefix  # type: ignore[attr-defined]
    changes = []
    ops = ((gnmi_pb2.UpdateResult.REPLACE, request.replace),  # type: ignore[attr-defined]
           (gnmi_pb2.UpdateResult.UPDATE, request.update))  # type: ignore[attr-defined]
    for op, updates in ops:
        for u in updates:
            path = path_of(prefix, u.path)
            changes.append(_port_change(path, u.val, op, target))
    if not changes:
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, f"target {target!r}: empty Set")
    return changes


def _port_change(path: OcPath, value: object, op: int, target: str) -> PortChange:
    schema = schema_path(path)
    interface = path[1].key("name") if len(path) > 1 else None
    if schema not in (ENABLED_LEAF, CONFIG_CONTAINER) or not interface or interface == "*":
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: path {format_path(path)} is not settable; only "
                        "/interfaces/interface[name=IF]/config/enabled is")
    decoded = _decode(value)
    if schema == CONFIG_CONTAINER and isinstance(decoded, dict):
        decoded = {bare_name(k): v for k, v in decoded.items()}.get("enabled")
    if not isinstance(decoded, bool):
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: {format_path(path)} needs a boolean enabled, "
                        f"got {decoded!r}")
    return PortChange(interface, decoded, path, op)


def _decode(value: object) -> object:
    """A TypedValue as a Python value (bool, or JSON decoded); None if it carries neither."""
    kind = value.WhichOneof("value")  # type: ignore[attr-defined]
    if kind == "bool_val":
        return bool(value.bool_val)  # type: ignore[attr-defined]
    if kind in ("json_val", "json_ietf_val", "proto_bytes", "ascii_val", "string_val"):
        raw = getattr(value, kind)
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    return None


def apply_set(request: object, device: str, frame: Frame, handler: SetHandler | None) -> Any:
    """Validate every operation of a ``gnmi.SetRequest``, then apply them in order.

    ``frame`` is the device's latest (its interfaces are the ones that exist).
    Returns the ``gnmi.SetResponse``; GnmiError names what was refused.
    """
    changes = parse_set(request, device)
    if handler is None:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED, f"target {device!r}: Set is not enabled")
    for change in changes:
        if port_id(device, change.interface) not in frame.entities:
            raise GnmiError(grpc.StatusCode.NOT_FOUND,
                            f"target {device!r} has no interface {change.interface!r}")
    for change in changes:
        try:
            handler.set_port_enabled(device, change.interface, change.enabled)
        except (ValueError, TimeoutError) as exc:
            raise GnmiError(grpc.StatusCode.FAILED_PRECONDITION, f"target {device!r}: "
                            f"{format_path(change.path)} not applied: {exc}") from exc
    results = [gnmi_pb2.UpdateResult(path=gnmi_path(c.path), op=c.op) for c in changes]
    return gnmi_pb2.SetResponse(prefix=gnmi_pb2.Path(target=device), response=results,
                                timestamp=max(frame.ts_ns, 1))


class DriverSetHandler:
    """Applies port changes to a running simulation through ``SimulationDriver.call``."""

    def __init__(self, driver: SimulationDriver, timeout_s: float = 10.0) -> None:
        self.driver = driver
        self.timeout_s = timeout_s

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        port = port_id(device, interface)
        if enabled:
            self.driver.call(lambda sim: sim.control.no_shut_port(port), self.timeout_s)
        else:
            self.driver.call(lambda sim: sim.control.shut_port(port), self.timeout_s)


class RecordingSetHandler:
    """A fake SetHandler: records every change; ports in ``refuse`` raise ValueError."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.changes: list[tuple[str, str, bool]] = []
        self._lock = threading.Lock()

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        port = port_id(device, interface)
        if port in self.refuse:
            raise ValueError(f"port {port!r} refuses changes")
        with self._lock:
            self.changes.append((device, interface, enabled))
