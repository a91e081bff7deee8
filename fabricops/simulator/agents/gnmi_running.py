"""The twin's running RoCE configuration over gNMI: Get and Set of its settings.

A Get is answered from the running configuration when it asks for configuration
(``GetRequest.type`` CONFIG: every setting, or those under the requested paths)
or when its path is a setting's ``config`` path (``/qos/interfaces/.../config/...``,
``/ecmp/hash/config/seed``, ``/interfaces/interface/config/mtu``); state paths of the
same trees stay telemetry. A Set whose every update names a setting
is applied all or nothing. Paths, keys and value rules are those of
:mod:`fabricops.core.roce_settings`; values go out as typed scalars with PROTO
encoding and as JSON_IETF otherwise (no-drop priorities: a JSON list either way).

Requests are parsed here (pure) and carried out by a ``SettingsHandler``:
``DriverSettingsHandler`` on a running simulation, ``MemorySettingsHandler``, the
fake for tests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, Protocol

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.openconfig import OcPath, bare_name, format_path, matches
from fabricops.core.roce_settings import (
    SettingError,
    SettingValue,
    check_value,
    key_of_path,
    leaf_of,
    setting_path,
    typed_value_of,
)
from fabricops.simulator.agents.driver import SimulationDriver
from fabricops.simulator.agents.gnmi_encode import PROTO, gnmi_path
from fabricops.simulator.agents.gnmi_stream import GnmiError, path_of

_TREES = (("qos", "interfaces"), ("ecmp", "hash", "config", "seed"),
          ("interfaces", "interface", "config", "mtu"))


class SettingsHandler(Protocol):
    """Reads and writes one device's running settings (keys of ``roce_settings``)."""

    def running_settings(self, device: str) -> dict[str, SettingValue]:
        """Every setting of ``device``; ValueError naming it if it has none."""
        ...

    def set_settings(self, device: str, values: Mapping[str, SettingValue]) -> None:
        """Apply ``values`` all or nothing; ValueError naming the first bad one."""
        ...


def serves_settings(handler: object) -> bool:
    """True if ``handler`` (a target's Set handler) also carries running settings."""
    return callable(getattr(handler, "running_settings", None)) and callable(
        getattr(handler, "set_settings", None))


def asks_for_settings(request_type: int, pattern: OcPath) -> bool:
    """True if a Get (its type and one path) is answered from the running settings: a
    CONFIG Get, or a path into a ``config`` container of a settings tree (state paths
    under the same trees stay telemetry)."""
    if request_type == gnmi_pb2.GetRequest.CONFIG:
        return True
    names = tuple(bare_name(e.name) for e in pattern)
    if names[:4] == ("ecmp", "hash", "config", "seed"):
        return True
    if names[:1] == ("interfaces",):
        return names[2:4] == ("config", "mtu")
    return names[:2] == ("qos", "interfaces") and "config" in names


def _typed(key: str, value: SettingValue, encoding: int) -> Any:
    kind = leaf_of(key).kind
    if kind is str:
        data = json.dumps([int(p) for p in str(value).split(",") if p]).encode()
        return gnmi_pb2.TypedValue(json_ietf_val=data)
    if encoding != PROTO:
        return gnmi_pb2.TypedValue(json_ietf_val=json.dumps(value).encode())
    if kind is bool:
        return gnmi_pb2.TypedValue(bool_val=bool(value))
    return gnmi_pb2.TypedValue(uint_val=int(value))


def settings_notification(pattern: OcPath, device: str, ts_ns: int, encoding: int,
                          handler: SettingsHandler | None, queue_name: str = "3") -> bytes:
    """The encoded ``gnmi.Notification`` of ``device``'s settings under ``pattern``
    (every setting for an empty pattern); GnmiError names what cannot be answered."""
    if handler is None:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {device!r}: running configuration is not served")
    try:
        running = handler.running_settings(device)
    except (ValueError, TimeoutError) as exc:
        raise GnmiError(grpc.StatusCode.FAILED_PRECONDITION,
                        f"target {device!r}: running configuration: {exc}") from exc
    updates = []
    for key, value in running.items():
        if key.startswith("nics."):
            continue  # a host's NIC settings are read on the host (mlnx_qos), not here
        path = setting_path(key, queue_name)
        if pattern and not matches(pattern, path):
            continue
        updates.append(gnmi_pb2.Update(path=gnmi_path(path), val=_typed(key, value, encoding)))
    if not updates:
        raise GnmiError(grpc.StatusCode.NOT_FOUND,
                        f"target {device!r}: path {format_path(pattern)} has no settings")
    note = gnmi_pb2.Notification(timestamp=max(ts_ns, 1), prefix=gnmi_pb2.Path(target=device),
                                 update=updates)
    data: bytes = note.SerializeToString()
    return data


def settings_changes(request: Any) -> dict[str, SettingValue] | None:
    """The settings a ``gnmi.SetRequest`` writes, or None if it is not a settings Set
    (its first update names no setting); GnmiError names a bad or mixed request."""
    updates = [*request.replace, *request.update]
    if not updates:
        return None
    out: dict[str, SettingValue] = {}
    for i, u in enumerate(updates):
        path = path_of(request.prefix, u.path)
        try:
            key = key_of_path(path)
        except SettingError as exc:
            if i == 0:
                return None
            raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT,
                            f"{exc}; a Set of settings carries settings only") from None
        try:
            out[key] = check_value(key, typed_value_of(u.val))
        except SettingError as exc:
            raise GnmiError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
    if request.delete:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED, "Set delete of settings is not supported")
    return out


def apply_settings(request: Any, values: Mapping[str, SettingValue], device: str,
                   ts_ns: int, handler: SettingsHandler | None) -> Any:
    """Apply a settings Set to ``device``; the ``gnmi.SetResponse``."""
    if handler is None:
        raise GnmiError(grpc.StatusCode.UNIMPLEMENTED,
                        f"target {device!r}: Set of settings is not enabled")
    try:
        handler.set_settings(device, values)
    except (ValueError, TimeoutError) as exc:
        raise GnmiError(grpc.StatusCode.FAILED_PRECONDITION,
                        f"target {device!r}: settings not applied: {exc}") from exc
    results = [gnmi_pb2.UpdateResult(path=u.path, op=gnmi_pb2.UpdateResult.UPDATE)
               for u in (*request.replace, *request.update)]
    return gnmi_pb2.SetResponse(prefix=gnmi_pb2.Path(target=device), response=results,
                                timestamp=max(ts_ns, 1))


class DriverSettingsHandler:
    """Running settings of a simulation, read and written between two ticks."""

    def __init__(self, driver: SimulationDriver, timeout_s: float = 10.0) -> None:
        self.driver = driver
        self.timeout_s = timeout_s

    def running_settings(self, device: str) -> dict[str, SettingValue]:
        return self.driver.call(lambda sim: sim.settings.device_settings(device),
                                self.timeout_s)

    def set_settings(self, device: str, values: Mapping[str, SettingValue]) -> None:
        self.driver.call(lambda sim: sim.settings.set(device, values), self.timeout_s)


class MemorySettingsHandler:
    """A fake SettingsHandler over a dict of devices' settings."""

    def __init__(self, settings: Mapping[str, Mapping[str, SettingValue]]) -> None:
        self.settings = {d: dict(v) for d, v in settings.items()}
        self._lock = threading.Lock()

    def running_settings(self, device: str) -> dict[str, SettingValue]:
        if device not in self.settings:
            raise ValueError(f"device {device!r} has no settings")
        return dict(self.settings[device])

    def set_settings(self, device: str, values: Mapping[str, SettingValue]) -> None:
        with self._lock:
            have = self.running_settings(device)
            unknown = [k for k in values if k not in have]
            if unknown:
                raise ValueError(f"setting {unknown[0]!r} does not exist on {device}")
            self.settings[device].update(values)
