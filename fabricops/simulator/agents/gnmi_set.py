"""gNMI Set for remediation: enabling and disabling ports, and a switch's ECMP hash fields.

Settable (``update`` or ``replace``; a bool, or JSON ``true``/``false``; or the
``config`` container with the leaf as a member):

- ``/interfaces/interface[name=IF]/config/enabled``: the port's admin state;
- ``/ecmp/hash/config/include-l4``: true hashes ECMP on L3+L4 (the flow's UDP
  source port too), false on the source and destination addresses only.

OpenConfig has no released leaf for ECMP hash fields, so, like the target's
other leaves outside the OpenConfig models (``/nics/nic/...``), the hash
fields are a bare OpenConfig-style tree with ``config`` and ``state``
containers. Get of ``/ecmp/hash/state/include-l4`` (or a path above it)
answers the fields in use (``hash_notification``).

Requests are parsed here (pure) and applied through a ``SetHandler``, so the
target never touches the simulator itself: ``DriverSetHandler`` applies them
to a running simulation between two ticks, ``RecordingSetHandler`` is the fake
for tests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.entities import port_id
from fabricops.core.frame import Frame
from fabricops.core.openconfig import (
    OcPath,
    bare_name,
    format_path,
    matches,
    parse_path,
    schema_path,
)
from fabricops.core.roce_settings import SettingValue
from fabricops.simulator.agents.driver import SimulationDriver
from fabricops.simulator.agents.gnmi_encode import PROTO, gnmi_path
from fabricops.simulator.agents.gnmi_stream import GnmiError, path_of

ENABLED_LEAF = "/interfaces/interface/config/enabled"
CONFIG_CONTAINER = "/interfaces/interface/config"
HASH_L4_LEAF = "/ecmp/hash/config/include-l4"
HASH_CONFIG_CONTAINER = "/ecmp/hash/config"
HASH_STATE_LEAF = "/ecmp/hash/state/include-l4"
HASH_ROOT = "ecmp"
_SETTABLE = f"{ENABLED_LEAF} (keyed by name) and {HASH_L4_LEAF} are"


class SetHandler(Protocol):
    """Applies a port's administrative state and a switch's ECMP hash fields."""

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        """Enable or disable ``interface`` of ``device``; ValueError naming the port if not."""
        ...

    def set_ecmp_hash(self, device: str, l4: bool) -> None:
        """Hash ECMP at ``device`` on L3+L4 if ``l4``, else on L3 only; ValueError naming
        the switch if not."""
        ...

    def ecmp_hash_l4(self, device: str) -> bool:
        """Whether ``device`` hashes ECMP on the UDP source port now; ValueError naming it."""
        ...


@dataclass(frozen=True)
class PortChange:
    """One parsed Set operation: a port to enable or disable, and the path it came from."""

    interface: str
    enabled: bool
    path: OcPath
    op: int  # gnmi_pb2.UpdateResult.Operation


@dataclass(frozen=True)
class HashChange:
    """One parsed Set operation: the switch's ECMP hash on L3+L4 (``l4``) or L3 only."""

    l4: bool
    path: OcPath
    op: int  # gnmi_pb2.UpdateResult.Operation


Change = PortChange | HashChange


def parse_set(request: object, target: str) -> list[Change]:
    """The changes of a ``gnmi.SetRequest``; GnmiError names what cannot be set."""
    if request.delete:  # type: ignore[attr-defined]
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {target!r}: Set delete is not supported")
    prefix = request.prefix  # type: ignore[attr-defined]
    changes: list[Change] = []
    ops = ((gnmi_pb2.UpdateResult.REPLACE, request.replace),  # type: ignore[attr-defined]
           (gnmi_pb2.UpdateResult.UPDATE, request.update))  # type: ignore[attr-defined]
    for op, updates in ops:
        for u in updates:
            path = path_of(prefix, u.path)
            changes.append(_change(path, u.val, op, target))
    if not changes:
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, f"target {target!r}: empty Set")
    return changes


def _change(path: OcPath, value: object, op: int, target: str) -> Change:
    schema = schema_path(path)
    if schema in (HASH_L4_LEAF, HASH_CONFIG_CONTAINER):
        return HashChange(_bool(path, value, schema == HASH_CONFIG_CONTAINER, "include-l4",
                                target), path, op)
    interface = path[1].key("name") if len(path) > 1 else None
    if schema not in (ENABLED_LEAF, CONFIG_CONTAINER) or not interface or interface == "*":
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: path {format_path(path)} is not settable; only "
                        f"{_SETTABLE}")
    return PortChange(interface, _bool(path, value, schema == CONFIG_CONTAINER, "enabled",
                                       target), path, op)


def _bool(path: OcPath, value: object, container: bool, leaf: str, target: str) -> bool:
    """The boolean a Set gives ``leaf``, as the leaf itself or a member of its container."""
    decoded = _decode(value)
    if container and isinstance(decoded, dict):
        decoded = {bare_name(k): v for k, v in decoded.items()}.get(leaf)
    if not isinstance(decoded, bool):
        raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                        f"target {target!r}: {format_path(path)} needs a boolean {leaf}, "
                        f"got {decoded!r}")
    return decoded


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
        if isinstance(change, PortChange) and port_id(device, change.interface) \
                not in frame.entities:
            raise GnmiError(grpc.StatusCode.NOT_FOUND,
                            f"target {device!r} has no interface {change.interface!r}")
    for change in changes:
        try:
            if isinstance(change, PortChange):
                handler.set_port_enabled(device, change.interface, change.enabled)
            else:
                handler.set_ecmp_hash(device, change.l4)
        except (ValueError, TimeoutError) as exc:
            raise GnmiError(grpc.StatusCode.FAILED_PRECONDITION, f"target {device!r}: "
                            f"{format_path(change.path)} not applied: {exc}") from exc
    results = [gnmi_pb2.UpdateResult(path=gnmi_path(c.path), op=c.op) for c in changes]
    return gnmi_pb2.SetResponse(prefix=gnmi_pb2.Path(target=device), response=results,
                                timestamp=max(frame.ts_ns, 1))


def asks_for_hash(pattern: OcPath) -> bool:
    """True if a Get ``pattern`` is in the ECMP hash tree (answered by ``hash_notification``)."""
    return bool(pattern) and bare_name(pattern[0].name) == HASH_ROOT


def hash_notification(pattern: OcPath, device: str, ts_ns: int, encoding: int,
                      handler: SetHandler | None) -> bytes:
    """The encoded ``gnmi.Notification`` of ``device``'s hash state leaf for a Get of
    ``pattern``; GnmiError names what cannot be answered."""
    leaf = parse_path(HASH_STATE_LEAF)
    if not matches(pattern, leaf):
        raise GnmiError(grpc.StatusCode.NOT_FOUND,
                        f"target {device!r}: path {format_path(pattern)} has no data; "
                        f"{HASH_STATE_LEAF} has")
    if handler is None:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {device!r}: ECMP hash state is not served")
    try:
        l4 = handler.ecmp_hash_l4(device)
    except (ValueError, TimeoutError) as exc:
        raise GnmiError(grpc.StatusCode.FAILED_PRECONDITION,
                        f"target {device!r}: {HASH_STATE_LEAF}: {exc}") from exc
    value = gnmi_pb2.TypedValue(bool_val=l4) if encoding == PROTO else \
        gnmi_pb2.TypedValue(json_ietf_val=json.dumps(l4).encode())
    note = gnmi_pb2.Notification(timestamp=max(ts_ns, 1), prefix=gnmi_pb2.Path(target=device),
                                 update=[gnmi_pb2.Update(path=gnmi_path(leaf), val=value)])
    data: bytes = note.SerializeToString()
    return data


class DriverSetHandler:
    """Applies changes to a running simulation through ``SimulationDriver.call``."""

    def __init__(self, driver: SimulationDriver, timeout_s: float = 10.0) -> None:
        self.driver = driver
        self.timeout_s = timeout_s

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        port = port_id(device, interface)
        if enabled:
            self.driver.call(lambda sim: sim.control.no_shut_port(port), self.timeout_s)
        else:
            self.driver.call(lambda sim: sim.control.shut_port(port), self.timeout_s)

    def set_ecmp_hash(self, device: str, l4: bool) -> None:
        self.driver.call(lambda sim: sim.control.set_ecmp_hash(device, l4=l4), self.timeout_s)

    def ecmp_hash_l4(self, device: str) -> bool:
        return self.driver.call(lambda sim: sim.control.ecmp_hash_l4(device), self.timeout_s)

    def running_settings(self, device: str) -> dict[str, SettingValue]:
        """The running RoCE settings of ``device`` (see ``gnmi_running``)."""
        return self.driver.call(lambda sim: sim.settings.device_settings(device),
                                self.timeout_s)

    def set_settings(self, device: str, values: Mapping[str, SettingValue]) -> None:
        """Apply RoCE settings to ``device`` all or nothing (see ``gnmi_running``)."""
        self.driver.call(lambda sim: sim.settings.set(device, values), self.timeout_s)


class RecordingSetHandler:
    """A fake SetHandler: records every change; ports and switches in ``refuse`` raise
    ValueError. Every switch hashes on L3+L4 until set otherwise (``hash_l4``)."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.refuse = refuse
        self.changes: list[tuple[str, str, bool]] = []
        self.hash_l4: dict[str, bool] = {}
        self._lock = threading.Lock()

    def set_ecmp_hash(self, device: str, l4: bool) -> None:
        if device in self.refuse:
            raise ValueError(f"switch {device!r} refuses changes")
        with self._lock:
            self.hash_l4[device] = l4

    def ecmp_hash_l4(self, device: str) -> bool:
        return self.hash_l4.get(device, True)

    def set_port_enabled(self, device: str, interface: str, enabled: bool) -> None:
        port = port_id(device, interface)
        if port in self.refuse:
            raise ValueError(f"port {port!r} refuses changes")
        with self._lock:
            self.changes.append((device, interface, enabled))
