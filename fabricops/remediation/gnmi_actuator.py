"""Shutting and re-enabling switch ports over gNMI Set.

``GnmiSetActuator`` carries out ``shut_port`` and ``no_shut_port`` on a port
``DEVICE:IFNAME``: one ``gnmi.SetRequest`` (prefix target DEVICE, an update of
``/interfaces/interface[name=IFNAME]/config/enabled`` with a bool) to the
device's gNMI server, taken from the device -> ``host:port`` map given at
construction. Channels, TLS and credentials are the collector's
(:mod:`fabricops.collectors.gnmi_config`). ``apply`` blocks for at most
``timeout_s`` and must not be called on a running event loop (use a worker
thread there). Setting a leaf to the value it has changes nothing, so applying
twice is applying once. Every failure (unknown device, unreachable, timeout, a
gRPC status from the target) is an ActuatorError naming the port and the cause.
The inverse is static, so the facts are always ``{}``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, ValidationError
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.collectors.gnmi_config import (
    GnmiEndpoint,
    GnmiSecurity,
    call_metadata,
    open_channel,
)
from fabricops.core.actions import Action, Param, Step, StepOp
from fabricops.core.entities import EntityError, split_port
from fabricops.core.inventory import Inventory
from fabricops.remediation.actuator import ActuatorError

_MAX_MESSAGE_BYTES = 4 << 20


class GnmiSetConfig(GnmiSecurity):
    """How the actuator reaches the devices: time allowed per Set, TLS, credentials."""

    timeout_s: float = Field(default=10.0, gt=0, description="Longest wait for a Set's answer")


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.steps = Counter("fabricops_gnmi_set_steps",
                             "Steps carried out over gNMI Set, by operation and outcome (ok, "
                             "unknown_device, bad_port, unreachable, timeout, refused, config)",
                             ["op", "outcome"], registry=registry)


class GnmiSetActuator:
    """Enables and disables switch ports with gNMI Set, one device map for every target."""

    name = "gnmi"
    ops = frozenset({StepOp.SHUT_PORT, StepOp.NO_SHUT_PORT})

    def __init__(self, config: GnmiSetConfig, addresses: Mapping[str, str],
                 registry: CollectorRegistry | None = None) -> None:
        """``addresses``: device id -> ``host:port`` of its gNMI server (ValueError if bad)."""
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)
        self._endpoints = {device: self._endpoint(device, address)
                           for device, address in addresses.items()}

    @classmethod
    def for_inventory(cls, inventory: Inventory,
                      registry: CollectorRegistry | None = None) -> GnmiSetActuator:
        """Every gNMI target of ``inventory``, with the first target's credentials;
        ValueError if the inventory has none."""
        targets = inventory.by_protocol("gnmi")
        if not targets:
            raise ValueError("the inventory has no gNMI target to send port changes to")
        creds = targets[0].gnmi.model_dump(include={"username", "password", "insecure"})
        return cls(GnmiSetConfig.model_validate(creds),
                   {t.device: t.address for t in targets}, registry)

    def _endpoint(self, device: str, address: str) -> GnmiEndpoint:
        cfg = self.config
        try:
            return GnmiEndpoint(device=device, address=address, **cfg.security())
        except ValidationError as exc:
            problems = "; ".join(e["msg"] for e in exc.errors())
            raise ValueError(f"gNMI address of device {device!r}: {problems}") from None

    def apply(self, step: Step, action: Action) -> dict[str, Param]:
        """Set the port's ``config/enabled``; ActuatorError names the port and the cause."""
        if step.op not in self.ops:
            raise ActuatorError(f"{step.describe()}: the gnmi actuator cannot carry out "
                                f"{step.op.value!r}")
        try:
            device, interface = split_port(step.target)
        except EntityError as exc:
            self._count(step, "bad_port")
            raise ActuatorError(f"{step.describe()}: {exc}") from None
        endpoint = self._endpoints.get(device)
        if endpoint is None:
            self._count(step, "unknown_device")
            raise ActuatorError(f"{step.describe()}: device {device!r} has no gNMI address "
                                f"({len(self._endpoints)} devices are known)")
        request = set_enabled_request(device, interface, step.op is StepOp.NO_SHUT_PORT)
        try:
            asyncio.run(self._set(endpoint, request))
        except _SetFailedError as exc:
            self._count(step, exc.outcome)
            raise ActuatorError(f"{step.describe()}: {exc}") from None
        self._count(step, "ok")
        return {}

    async def _set(self, endpoint: GnmiEndpoint, request: Any) -> None:
        timeout = self.config.timeout_s
        where = f"{endpoint.device} at {endpoint.address}"
        try:
            channel = open_channel(endpoint, _MAX_MESSAGE_BYTES)
        except OSError as exc:
            raise _SetFailedError("config", f"{where}: {exc}") from None
        try:
            stub = gnmi_pb2_grpc.gNMIStub(channel)
            await stub.Set(request, timeout=timeout, metadata=call_metadata(endpoint),
                           wait_for_ready=False)
        except grpc.aio.AioRpcError as exc:
            raise _failure(where, exc, timeout) from None
        finally:
            await channel.close()

    def _count(self, step: Step, outcome: str) -> None:
        self._metrics.steps.labels(step.op.value, outcome).inc()


def set_enabled_request(device: str, interface: str, enabled: bool) -> Any:
    """The ``gnmi.SetRequest`` updating ``interface``'s ``config/enabled`` on ``device``."""
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="interfaces"),
                               gnmi_pb2.PathElem(name="interface", key={"name": interface}),
                               gnmi_pb2.PathElem(name="config"),
                               gnmi_pb2.PathElem(name="enabled")])
    update = gnmi_pb2.Update(path=path, val=gnmi_pb2.TypedValue(bool_val=enabled))
    return gnmi_pb2.SetRequest(prefix=gnmi_pb2.Path(target=device), update=[update])


class _SetFailedError(Exception):
    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome


def _failure(where: str, exc: Any, timeout_s: float) -> _SetFailedError:
    code = exc.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return _SetFailedError("timeout", f"{where}: no answer within {timeout_s:g} s")
    if code == grpc.StatusCode.UNAVAILABLE:
        return _SetFailedError("unreachable", f"{where}: unreachable: {exc.details()}")
    return _SetFailedError("refused", f"{where}: refused: {code.name}: {exc.details()}")
