"""The twin's running RoCE configuration over gNMI: Get and Set of its settings.

A Get answers from the running configuration when it asks for configuration
(``GetRequest.type`` CONFIG or ALL: every setting, or those under the requested
paths, ``settings_updates``); state paths of the same trees stay telemetry. A
Set whose every update names a setting is applied all or nothing. Paths, keys
and value rules are those of :mod:`fabricops.core.roce_settings`. Values go out
as their YANG types say: with PROTO encoding ``bool_val``, ``uint_val`` and a
``leaflist_val`` of ``uint_val`` for the no-drop priorities; with JSON bare JSON
values; with JSON_IETF the same, but the ``uint64`` leaves (WRED thresholds,
headroom) as strings (RFC 7951).

Requests are parsed here (pure) and carried out by a ``SettingsHandler``:
``DriverSettingsHandler`` on a running simulation, ``MemorySettingsHandler``, the
fake for tests.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, Final, Protocol

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.openconfig import OcPath, bare_name, matches
from fabricops.core.roce_settings import (
    PORT_LEAVES,
    SettingError,
    SettingValue,
    check_value,
    key_of_path,
    leaf_of,
    setting_path,
    split_key,
    typed_value_of,
)
from fabricops.simulator.agents.driver import SimulationDriver
from fabricops.simulator.agents.gnmi_encode import JSON_IETF, PROTO, gnmi_path
from fabricops.simulator.agents.gnmi_stream import GnmiError, path_of


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


_SCHEMAS: Final = frozenset(
    tuple(e.name for e in setting_path(key))
    for key in ("hash_seed", *(f"ports.x.{leaf.key}" for leaf in PORT_LEAVES)))


def may_hold_settings(pattern: OcPath) -> bool:
    """False if no setting can lie at or below ``pattern`` (its element names say so),
    so a Get there need not read the running configuration."""
    names = tuple(bare_name(e.name) for e in pattern)
    if "*" in names or "..." in names:
        return True
    return any(schema[:len(names)] == names for schema in _SCHEMAS)


_UINT64_LEAVES: Final = frozenset({"ecn.min_threshold_bytes", "ecn.max_threshold_bytes",
                                   "headroom_bytes"})


def _typed(key: str, value: SettingValue, encoding: int) -> Any:
    leaf = split_key(key)[1]
    kind = leaf_of(key).kind
    if kind is str:
        priorities = [int(p) for p in str(value).split(",") if p]
        if encoding == PROTO:
            return gnmi_pb2.TypedValue(leaflist_val=gnmi_pb2.ScalarArray(
                element=[gnmi_pb2.TypedValue(uint_val=p) for p in priorities]))
        return _json_typed(json.dumps(priorities), encoding)
    if encoding == PROTO:
        if kind is bool:
            return gnmi_pb2.TypedValue(bool_val=bool(value))
        return gnmi_pb2.TypedValue(uint_val=int(value))
    if kind is not bool and encoding == JSON_IETF and leaf in _UINT64_LEAVES:
        return _json_typed(json.dumps(str(int(value))), encoding)
    return _json_typed(json.dumps(value), encoding)


def _json_typed(text: str, encoding: int) -> Any:
    if encoding == JSON_IETF:
        return gnmi_pb2.TypedValue(json_ietf_val=text.encode())
    return gnmi_pb2.TypedValue(json_val=text.encode())


def settings_updates(pattern: OcPath, device: str, encoding: int, handler: SettingsHandler,
                     queue_name: str = "3") -> list[Any]:
    """The ``gnmi.Update`` of each of ``device``'s settings under ``pattern`` (every
    setting for an empty pattern), possibly none; GnmiError if they cannot be read."""
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
    return updates


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
