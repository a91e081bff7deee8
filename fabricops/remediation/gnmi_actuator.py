"""Switch ports and ECMP hash fields changed over gNMI Set.

``GnmiSetActuator`` sends one ``gnmi.SetRequest`` (prefix target DEVICE) per
step to the device's gNMI server, taken from the device -> ``host:port`` map
given at construction:

- ``shut_port`` / ``no_shut_port`` on a port ``DEVICE:IFNAME``: an update of
  ``/interfaces/interface[name=IFNAME]/config/enabled`` with a bool. The
  inverse is static, so the facts are ``{}``.
- ``set_hash`` on a switch ``DEVICE`` (params ``l4``): an update of
  ``/ecmp/hash/config/include-l4`` with a bool (true: hash on L3+L4, the
  flow's UDP source port too; false: source and destination address only).
  OpenConfig has no released leaf for ECMP hash fields; this bare
  OpenConfig-style tree is the one the simulated fabric's target serves beside
  its other leaves outside the OpenConfig models (``/nics/nic/...``). First a
  ``gnmi.GetRequest`` of ``/ecmp/hash/state/include-l4`` reads the fields in
  use: they are the fact ``previous`` the undo restores, and a switch whose
  hash cannot be read is not changed.

- ``set_config`` on a device ``DEVICE`` (params: setting key -> value): one update
  per setting at its path (:mod:`fabricops.core.roce_settings`), after a Get of the
  device's configuration whose values are the facts ``previous.<setting>``.

Before an action's first step, the engine asks each of its devices whether it
answers (``check``): a ``gnmi.GetRequest`` of what the step reads or changes
(the port's ``state/oper-status``, the hash fields, the settings). Only an
unreachable device or no answer within ``timeout_s`` is an UnreachableError;
any other answer, a refusal too, shows the device is there.

Channels, TLS and credentials are the collector's
(:mod:`fabricops.collectors.gnmi_config`). ``apply`` blocks for at most
``timeout_s`` per RPC and must not be called on a running event loop (use a
worker thread there). Setting a leaf to the value it has changes nothing, so
applying twice is applying once. Every failure (unknown device, unreachable,
timeout, a gRPC status from the target) is an ActuatorError naming the target
and the cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter
from pydantic import Field, ValidationError
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.collectors import grpc_loop
from fabricops.collectors.gnmi_config import (
    GnmiEndpoint,
    GnmiSecurity,
    call_metadata,
    open_channel,
)
from fabricops.collectors.gnmi_settings import (
    parse_settings,
    settings_get_request,
    settings_set_request,
)
from fabricops.core.actions import Action, Param, Step, StepOp
from fabricops.core.entities import PORT_SEP, EntityError, split_port
from fabricops.core.inventory import Inventory
from fabricops.core.openconfig import bare_name
from fabricops.remediation.actuator import PREVIOUS, ActuatorError, UnreachableError

_MAX_MESSAGE_BYTES = 4 << 20
_SILENT = ("unreachable", "timeout")  # outcomes of a device that did not answer


class GnmiSetConfig(GnmiSecurity):
    """How the actuator reaches the devices: time allowed per RPC, TLS, credentials."""

    timeout_s: float = Field(default=10.0, gt=0,
                             description="Longest wait for the answer to a Get or a Set")


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.steps = Counter("fabricops_gnmi_set_steps",
                             "Steps carried out over gNMI Set, by operation and outcome (ok, "
                             "unknown_device, bad_port, bad_target, unreachable, timeout, "
                             "refused, config)",
                             ["op", "outcome"], registry=registry)
        self.checks = Counter("fabricops_gnmi_set_checks",
                              "Devices asked before an action's first step whether they "
                              "answer, by outcome (answered, unreachable, timeout)",
                              ["outcome"], registry=registry)


class GnmiSetActuator:
    """Changes switch ports and ECMP hash fields with gNMI Set, one device map for every
    target."""

    name = "gnmi"
    ops = frozenset({StepOp.SHUT_PORT, StepOp.NO_SHUT_PORT, StepOp.SET_HASH,
                     StepOp.SET_CONFIG})

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
        """Every gNMI target of ``inventory``, with the first target's TLS settings and
        credentials; ValueError if the inventory has none."""
        targets = inventory.by_protocol("gnmi")
        if not targets:
            raise ValueError("the inventory has no gNMI target to send changes to")
        creds = targets[0].gnmi.model_dump(include=set(GnmiSecurity.model_fields))
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
        """Carry out ``step`` (see the module docstring); ActuatorError names the target
        and the cause."""
        if step.op not in self.ops:
            raise ActuatorError(f"{step.describe()}: the gnmi actuator cannot carry out "
                                f"{step.op.value!r}")
        try:
            endpoint = self._endpoint_of(step)
            facts = grpc_loop.run(self._carry_out(step, endpoint))
        except _SetFailedError as exc:
            self._count(step, exc.outcome)
            if exc.outcome in _SILENT:
                raise UnreachableError(f"{step.describe()}: {exc}", endpoint.device) from None
            raise ActuatorError(f"{step.describe()}: {exc}") from None
        self._count(step, "ok")
        return facts

    def check(self, step: Step) -> None:
        """UnreachableError if the device of ``step`` is unreachable or does not answer a
        Get within ``timeout_s``; a step this actuator cannot carry out, or whose device
        it does not know, is left for ``apply`` to refuse."""
        if step.op not in self.ops:
            return
        try:
            endpoint = self._endpoint_of(step)
        except _SetFailedError:
            return
        try:
            grpc_loop.run(self._probe(step, endpoint))
        except _SetFailedError as exc:
            self._metrics.checks.labels(exc.outcome).inc()
            raise UnreachableError(f"{step.describe()}: {exc}", endpoint.device) from None
        self._metrics.checks.labels("answered").inc()

    async def _probe(self, step: Step, endpoint: GnmiEndpoint) -> None:
        timeout = self.config.timeout_s
        try:
            channel = open_channel(endpoint, _MAX_MESSAGE_BYTES)
        except OSError:
            return  # a channel that cannot be made: apply says why
        try:
            await gnmi_pb2_grpc.gNMIStub(channel).Get(
                probe_request(step, endpoint.device), timeout=timeout,
                metadata=call_metadata(endpoint), wait_for_ready=False)
        except grpc.aio.AioRpcError as exc:
            failure = _failure(f"{endpoint.device} at {endpoint.address}", exc, timeout)
            if failure.outcome in _SILENT:
                raise failure from None
        finally:
            await channel.close()

    def _endpoint_of(self, step: Step) -> GnmiEndpoint:
        """The endpoint of the device ``step`` acts on; _SetFailedError (bad_target,
        bad_port, unknown_device) if it names none this actuator knows."""
        if step.op in (StepOp.SET_HASH, StepOp.SET_CONFIG):
            device = step.target
            if PORT_SEP in device:
                raise _SetFailedError("bad_target", f"{device!r} is a port; set_hash needs "
                                      "a switch")
        else:
            try:
                device = split_port(step.target)[0]
            except EntityError as exc:
                raise _SetFailedError("bad_port", str(exc)) from None
        endpoint = self._endpoints.get(device)
        if endpoint is None:
            raise _SetFailedError("unknown_device", f"device {device!r} has no gNMI address "
                                  f"({len(self._endpoints)} devices are known)")
        return endpoint

    async def _carry_out(self, step: Step, endpoint: GnmiEndpoint) -> dict[str, Param]:
        timeout = self.config.timeout_s
        where = f"{endpoint.device} at {endpoint.address}"
        try:
            channel = open_channel(endpoint, _MAX_MESSAGE_BYTES)
        except OSError as exc:
            raise _SetFailedError("config", f"{where}: {exc}") from None
        stub, metadata = gnmi_pb2_grpc.gNMIStub(channel), call_metadata(endpoint)
        facts: dict[str, Param] = {}
        try:
            if step.op is StepOp.SET_CONFIG:
                answer = await stub.Get(settings_get_request(endpoint.device), timeout=timeout,
                                        metadata=metadata, wait_for_ready=False)
                running = parse_settings(answer).values
                missing = sorted(k for k in step.params if k not in running)
                if missing:
                    raise _SetFailedError("refused", f"{where}: settings not served: "
                                          + ", ".join(missing[:5]))
                facts.update({f"{PREVIOUS}{k}": running[k] for k in step.params})
                try:
                    request = settings_set_request(endpoint.device, {
                        k: v for k, v in step.params.items() if isinstance(v, int | str)})
                except ValueError as exc:
                    raise _SetFailedError("refused", f"{where}: {exc}") from None
            elif step.op is StepOp.SET_HASH:
                answer = await stub.Get(hash_get_request(endpoint.device), timeout=timeout,
                                        metadata=metadata, wait_for_ready=False)
                facts["previous"] = _hash_l4_of(answer, where)
                request = set_hash_request(endpoint.device, bool(step.params["l4"]))
            else:
                _, interface = split_port(step.target)
                request = set_enabled_request(endpoint.device, interface,
                                              step.op is StepOp.NO_SHUT_PORT)
            await stub.Set(request, timeout=timeout, metadata=metadata, wait_for_ready=False)
        except grpc.aio.AioRpcError as exc:
            raise _failure(where, exc, timeout) from None
        finally:
            await channel.close()
        return facts

    def _count(self, step: Step, outcome: str) -> None:
        self._metrics.steps.labels(step.op.value, outcome).inc()


def _path(*elems: str | tuple[str, dict[str, str]]) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e) if isinstance(e, str)
                               else gnmi_pb2.PathElem(name=e[0], key=e[1]) for e in elems])


def set_enabled_request(device: str, interface: str, enabled: bool) -> Any:
    """The ``gnmi.SetRequest`` updating ``interface``'s ``config/enabled`` on ``device``."""
    path = _path("interfaces", ("interface", {"name": interface}), "config", "enabled")
    update = gnmi_pb2.Update(path=path, val=gnmi_pb2.TypedValue(bool_val=enabled))
    return gnmi_pb2.SetRequest(prefix=gnmi_pb2.Path(target=device), update=[update])


def probe_request(step: Step, device: str) -> Any:
    """The ``gnmi.GetRequest`` ``check`` sends to ``device`` for ``step``: what the step
    reads first (hash fields, settings), or for a port its ``state/oper-status``."""
    if step.op is StepOp.SET_HASH:
        return hash_get_request(device)
    if step.op is StepOp.SET_CONFIG:
        return settings_get_request(device)
    _, interface = split_port(step.target)
    path = _path("interfaces", ("interface", {"name": interface}), "state", "oper-status")
    return gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=device), path=[path],
                               type=gnmi_pb2.GetRequest.STATE,
                               encoding=gnmi_pb2.JSON_IETF)


def set_hash_request(device: str, l4: bool) -> Any:
    """The ``gnmi.SetRequest`` hashing ECMP on L3+L4 (``l4``) or L3 only on ``device``."""
    update = gnmi_pb2.Update(path=_path("ecmp", "hash", "config", "include-l4"),
                             val=gnmi_pb2.TypedValue(bool_val=l4))
    return gnmi_pb2.SetRequest(prefix=gnmi_pb2.Path(target=device), update=[update])


def hash_get_request(device: str) -> Any:
    """The ``gnmi.GetRequest`` of ``device``'s ECMP hash fields in use."""
    return gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=device), encoding=gnmi_pb2.PROTO,
                               path=[_path("ecmp", "hash", "state", "include-l4")])


def _hash_l4_of(answer: Any, where: str) -> bool:
    """The boolean ``include-l4`` of a GetResponse; _SetFailedError if it has none."""
    values = [u.val for n in answer.notification for u in n.update
              if u.path.elem and bare_name(u.path.elem[-1].name) == "include-l4"]
    for val in values:
        kind = val.WhichOneof("value")
        if kind == "bool_val":
            return bool(val.bool_val)
        if kind in ("json_val", "json_ietf_val") and getattr(val, kind) in (b"true", b"false"):
            return bool(getattr(val, kind) == b"true")
    raise _SetFailedError("refused", f"{where}: the answer to a Get of "
                                     "/ecmp/hash/state/include-l4 holds no boolean")


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
