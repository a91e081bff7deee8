"""A switch's running RoCE settings over gNMI: Get them, Set them.

The settings and their paths are those of :mod:`fabricops.core.roce_settings`.
Requests and answers are built and parsed here without I/O (``settings_get_request``,
``settings_set_request``, ``parse_settings``); ``GnmiSettingsClient`` is the thin
transport (one channel per call, the collector's TLS and credentials).

``parse_settings`` never drops what it cannot use: a path that names no setting is
counted in ``unmapped`` and a value that breaks its setting's range in ``refused``,
each with the path and the reason, so a dialect gap shows up instead of a silently
missing setting.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter
from pydantic import ValidationError
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.collectors import grpc_loop
from fabricops.collectors.gnmi_config import (
    GnmiEndpoint,
    GnmiSecurity,
    call_metadata,
    open_channel,
)
from fabricops.core.openconfig import OcPath, PathElem, format_path
from fabricops.core.roce_settings import (
    SettingError,
    SettingValue,
    check_value,
    key_of_path,
    leaf_of,
    setting_path,
    typed_value_of,
)

_MAX_MESSAGE_BYTES = 16 << 20


class SettingsReadError(RuntimeError):
    """A device whose settings could not be read or written; names the device and cause."""


@dataclass
class ParsedSettings:
    """Settings read from a Get answer, and what could not be used (path, reason)."""

    values: dict[str, SettingValue] = field(default_factory=dict)
    unmapped: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def _pb_path(path: OcPath, target: str = "") -> Any:
    return gnmi_pb2.Path(target=target, elem=[
        gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path])


def _oc_path(prefix: Any, path: Any) -> OcPath:
    elems = [*prefix.elem, *path.elem]
    return tuple(PathElem(e.name, tuple(sorted(e.key.items()))) for e in elems)


def settings_get_request(device: str) -> Any:
    """Get of every configuration leaf of ``device`` (type CONFIG, JSON_IETF)."""
    return gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=device),
                               type=gnmi_pb2.GetRequest.CONFIG, encoding=gnmi_pb2.JSON_IETF)


def typed_value(key: str, value: SettingValue) -> Any:
    """The gNMI TypedValue of setting ``key``: uint, bool, or a JSON list of priorities."""
    kind = leaf_of(key).kind
    if kind is bool:
        return gnmi_pb2.TypedValue(bool_val=bool(value))
    if kind is int:
        return gnmi_pb2.TypedValue(uint_val=int(value))
    priorities = [int(p) for p in str(value).split(",") if p]
    return gnmi_pb2.TypedValue(json_ietf_val=json.dumps(priorities).encode())


def settings_set_request(device: str, values: Mapping[str, SettingValue],
                         queue_name: str = "3") -> Any:
    """One Set updating every setting in ``values``; SettingError names a bad one."""
    updates = [gnmi_pb2.Update(path=_pb_path(setting_path(k, queue_name)),
                               val=typed_value(k, check_value(k, v)))
               for k, v in values.items()]
    return gnmi_pb2.SetRequest(prefix=gnmi_pb2.Path(target=device), update=updates)


def parse_settings(response: Any) -> ParsedSettings:
    """Every setting in a ``gnmi.GetResponse`` (see the module docstring)."""
    out = ParsedSettings()
    for note in response.notification:
        for update in note.update:
            path = _oc_path(note.prefix, update.path)
            text = format_path(path)
            try:
                key = key_of_path(path)
            except SettingError as exc:
                out.unmapped.append((text, str(exc)))
                continue
            try:
                out.values[key] = check_value(key, typed_value_of(update.val))
            except SettingError as exc:
                out.refused.append((text, str(exc)))
    return out


class GnmiSettingsClient:
    """Reads and writes switches' RoCE settings over gNMI (blocking; not on an event loop)."""

    def __init__(self, addresses: Mapping[str, str], security: GnmiSecurity | None = None,
                 timeout_s: float = 10.0, registry: CollectorRegistry | None = None) -> None:
        self.addresses = dict(addresses)
        self.security = security or GnmiSecurity()
        self.timeout_s = timeout_s
        self.registry = registry if registry is not None else CollectorRegistry()
        self.m_calls = Counter("fabricops_gnmi_settings_calls",
                               "Settings Get/Set calls, by method and outcome (ok, failed)",
                               ["method", "outcome"], registry=self.registry)
        self.m_unused = Counter("fabricops_gnmi_settings_unused_paths",
                                "Answered paths that name no setting or break its range",
                                registry=self.registry)

    def endpoint(self, device: str) -> GnmiEndpoint:
        address = self.addresses.get(device)
        if address is None:
            raise SettingsReadError(f"{device}: no gNMI address is known for it")
        try:
            return GnmiEndpoint(device=device, address=address,
                                **self.security.model_dump(exclude_unset=True))
        except ValidationError as exc:
            raise SettingsReadError(f"{device}: gNMI address {address!r}: "
                                    f"{exc.errors()[0]['msg']}") from None

    def read(self, device: str) -> ParsedSettings:
        """The running settings of ``device``; SettingsReadError names the cause."""
        answer = grpc_loop.run(self._call(device, "Get", settings_get_request(device)))
        parsed = parse_settings(answer)
        self.m_unused.inc(len(parsed.unmapped) + len(parsed.refused))
        return parsed

    def write(self, device: str, values: Mapping[str, SettingValue]) -> None:
        """Set ``values`` on ``device``; SettingsReadError (or SettingError) names the cause."""
        request = settings_set_request(device, values)
        grpc_loop.run(self._call(device, "Set", request))

    async def _call(self, device: str, method: str, request: Any) -> Any:
        endpoint = self.endpoint(device)
        where = f"{device} at {endpoint.address}"
        try:
            channel = open_channel(endpoint, _MAX_MESSAGE_BYTES)
        except OSError as exc:
            raise SettingsReadError(f"{where}: {exc}") from None
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        try:
            answer = await getattr(stub, method)(request, timeout=self.timeout_s,
                                                 metadata=call_metadata(endpoint),
                                                 wait_for_ready=False)
            self.m_calls.labels(method, "ok").inc()
            return answer
        except grpc.aio.AioRpcError as exc:
            self.m_calls.labels(method, "failed").inc()
            raise SettingsReadError(f"{where}: gNMI {method} failed: {exc.code().name}: "
                                    f"{exc.details()}") from None
        finally:
            await channel.close()


__all__ = ["GnmiSettingsClient", "ParsedSettings", "SettingsReadError",
           "parse_settings", "settings_get_request", "settings_set_request", "typed_value"]
