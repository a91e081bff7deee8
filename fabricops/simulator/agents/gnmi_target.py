"""A gNMI target on loopback that serves every switch of a frame board.

One gRPC server, many switches: a request's ``prefix.target`` (or its first
path's ``target``) names the switch; an unknown name is NOT_FOUND and a switch
that has no frame (down) is UNAVAILABLE, mid-stream too. Capabilities, Get,
Subscribe (STREAM with SAMPLE / ON_CHANGE / TARGET_DEFINED, ONCE, POLL; see
:mod:`~fabricops.simulator.agents.gnmi_stream` for the schedule, in device
time), Set of a port's ``config/enabled`` and of the switch's ECMP hash fields, and
Get of those hash fields (see :mod:`~fabricops.simulator.agents.gnmi_set`), and Get and
Set of the running RoCE settings when the Set handler carries them
(:mod:`~fabricops.simulator.agents.gnmi_running`).
Leaves and values are those of :mod:`fabricops.core.openconfig` and
:mod:`~fabricops.simulator.agents.gnmi_encode`; timestamps are the frames'
(ns since the epoch). Optional TLS and a username/password checked on every RPC
(gRPC metadata ``username`` and ``password``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.frame import Frame
from fabricops.core.openconfig import OpenConfigSchema, format_path
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.gnmi_encode import (
    SYNC_RESPONSE,
    LeafTables,
    encode_notification,
    get_response,
    subscribe_response,
)
from fabricops.simulator.agents.gnmi_running import (
    apply_settings,
    asks_for_settings,
    serves_settings,
    settings_changes,
    settings_notification,
)
from fabricops.simulator.agents.gnmi_set import (
    SetHandler,
    apply_set,
    asks_for_hash,
    hash_notification,
)
from fabricops.simulator.agents.gnmi_stream import (
    GnmiError,
    StreamState,
    check_encoding,
    path_of,
    subscriptions_of,
)
from fabricops.simulator.agents.lldp import Cabling, asks_for_lldp, lldp_notification

GNMI_VERSION: Final = "0.8.0"
MODELS: Final = (("openconfig-interfaces", "3.7.1"), ("openconfig-qos", "0.11.2"),
                 ("openconfig-platform", "0.24.0"))
_TICK_WAIT_S: Final = 0.25
_Code = grpc.StatusCode


class GnmiTargetConfig(BaseModel):
    """Where the target listens, what it accepts, and its OpenConfig naming."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    max_rpcs: int = Field(default=256, ge=1, description="Concurrent RPCs (streams included); "
                          "more are refused with RESOURCE_EXHAUSTED")
    tls_cert_file: Path | None = Field(default=None, description="PEM server certificate chain")
    tls_key_file: Path | None = Field(default=None, description="PEM private key")
    username: str | None = None
    password: SecretStr | None = None
    queue_name: str = Field(default="3", description="Name of the lossless egress queue")
    target_defined_interval_s: float = Field(default=10.0, gt=0,
                                             description="SAMPLE interval of TARGET_DEFINED")

    @model_validator(mode="after")
    def _pairs(self) -> GnmiTargetConfig:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        return self


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.rpcs = Counter("fabricops_sim_gnmi_rpcs", "gNMI RPCs answered, by status code",
                            ["method", "code"], registry=registry)
        self.streams = Gauge("fabricops_sim_gnmi_streams", "Subscribe RPCs open",
                             registry=registry)
        self.notifications = Counter("fabricops_sim_gnmi_notifications",
                                     "Notifications sent on Subscribe RPCs", registry=registry)
        self.updates = Counter("fabricops_sim_gnmi_updates", "Leaf updates sent on Subscribe RPCs",
                               registry=registry)


def _serialize(message: Any) -> bytes:
    """Responses are either pre-encoded bytes or protobuf messages."""
    if isinstance(message, bytes):
        return message
    data: bytes = message.SerializeToString()
    return data


class GnmiTarget:
    """Serves ``switches`` (their frames on ``board``) over gNMI on one TCP port.

    Inert until ``start``; ``port`` is the bound port once started, and a target
    started again after ``stop`` listens on the same port. Set needs a
    ``set_handler``; without one it is UNIMPLEMENTED.
    """

    def __init__(self, config: GnmiTargetConfig, board: FrameBoard, switches: Sequence[str],
                 set_handler: SetHandler | None = None,
                 registry: CollectorRegistry | None = None, cabling: Cabling | None = None,
                 ) -> None:
        self.config = config
        self.cabling = cabling  # when given, Get of /lldp is answered from it
        self.board = board
        self.switches = tuple(switches)
        self.set_handler = set_handler
        self.port = config.port
        self._served = frozenset(self.switches)
        self._tables = LeafTables(OpenConfigSchema(queue_name=config.queue_name))
        self._server: Any = None
        self._stopping = threading.Event()
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = _Metrics(self.registry)

    @property
    def address(self) -> str:
        return f"{self.config.host}:{self.port}"

    def start(self) -> None:
        """Bind and serve on gRPC's threads; errors name the address or file."""
        cfg = self.config
        server = grpc.server(ThreadPoolExecutor(max_workers=cfg.max_rpcs,
                                                thread_name_prefix="sim-gnmi"),
                             maximum_concurrent_rpcs=cfg.max_rpcs)
        server.add_generic_rpc_handlers((self._handlers(),))
        address = f"{cfg.host}:{self.port}"
        try:
            if cfg.tls_cert_file is not None and cfg.tls_key_file is not None:
                pair = (_read(cfg.tls_key_file, "TLS key"), _read(cfg.tls_cert_file, "TLS cert"))
                port = server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
            else:
                port = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"gNMI target cannot bind {address}: {exc}") from exc
        if not port:
            raise OSError(f"gNMI target cannot bind {address}")
        self.port = port
        self._stopping.clear()
        server.start()
        self._server = server

    def stop(self, grace_s: float = 1.0) -> None:
        """Close every RPC and the port."""
        self._stopping.set()
        if self._server is not None:
            self._server.stop(grace_s).wait(grace_s + 5)
            self._server = None

    def _handlers(self) -> Any:
        def unary(method: str, fn: Callable[[Any], Any], request_type: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(method, fn), request_deserializer=request_type.FromString,
                response_serializer=_serialize)

        return grpc.method_handlers_generic_handler("gnmi.gNMI", {
            "Capabilities": unary("Capabilities", self._capabilities,
                                  gnmi_pb2.CapabilityRequest),
            "Get": unary("Get", self._get, gnmi_pb2.GetRequest),
            "Set": unary("Set", self._set, gnmi_pb2.SetRequest),
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                self._subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString,
                response_serializer=_serialize),
        })

    def _unary(self, method: str, fn: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
        def handle(request: Any, context: Any) -> Any:
            try:
                self._authorize(context)
                response = fn(request)
            except GnmiError as exc:
                self._metrics.rpcs.labels(method, exc.code.name).inc()
                context.abort(exc.code, exc.message)
            self._metrics.rpcs.labels(method, "OK").inc()
            return response
        return handle

    def _authorize(self, context: Any) -> None:
        if self.config.username is None or self.config.password is None:
            return
        metadata = dict(context.invocation_metadata())
        if (metadata.get("username") != self.config.username
                or metadata.get("password") != self.config.password.get_secret_value()):
            raise GnmiError(_Code.UNAUTHENTICATED, "invalid username or password")

    def _device(self, prefix: Any, paths: Sequence[Any] = ()) -> str:
        """The switch a request names; GnmiError if none, unknown or ambiguous."""
        name = prefix.target or next((p.target for p in paths if p.target), "")
        if not name and len(self.switches) == 1:
            return self.switches[0]
        example = ", ".join(self.switches[:3]) + (", ..." if len(self.switches) > 3 else "")
        if not name:
            raise GnmiError(_Code.INVALID_ARGUMENT,
                            f"request names no target; set prefix.target to a switch ({example})")
        if name not in self._served:
            raise GnmiError(_Code.NOT_FOUND, f"target {name!r} is not served here "
                            f"({len(self.switches)} switches: {example})")
        return str(name)

    def _frame(self, device: str) -> Frame:
        frame = self.board.latest(device)
        if frame is None:
            raise GnmiError(_Code.UNAVAILABLE, f"target {device!r} is down (no telemetry)")
        return frame

    def _capabilities(self, request: Any) -> Any:
        models = [gnmi_pb2.ModelData(name=n, organization="OpenConfig working group", version=v)
                  for n, v in MODELS]
        return gnmi_pb2.CapabilityResponse(
            supported_models=models, gNMI_version=GNMI_VERSION,
            supported_encodings=[gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO])

    def _get(self, request: Any) -> bytes:
        """One notification per requested path (the whole tree if none); data is state only."""
        device = self._device(request.prefix, request.path)
        encoding = check_encoding(request.encoding, device)
        frame = self._frame(device)
        table = self._tables.of(frame)
        notifications = []
        for path in request.path or [gnmi_pb2.Path()]:
            pattern = path_of(request.prefix, path)
            if serves_settings(self.set_handler) and asks_for_settings(request.type, pattern):
                notifications.append(settings_notification(
                    pattern, device, frame.ts_ns, encoding, self.set_handler,  # type: ignore[arg-type]
                    self.config.queue_name))
                continue
            if asks_for_hash(pattern):
                notifications.append(hash_notification(pattern, device, frame.ts_ns, encoding,
                                                       self.set_handler))
                continue
            lldp = None if self.cabling is None or not asks_for_lldp(pattern) else \
                lldp_notification(self.cabling, pattern, device, frame.ts_ns,
                                  encoding == gnmi_pb2.JSON_IETF)
            if lldp is not None:
                notifications.append(lldp)
                continue
            indices = table.select(pattern)
            if not len(indices):
                raise GnmiError(_Code.NOT_FOUND,
                                f"target {device!r}: path {format_path(pattern)} has no data")
            notifications.append(encode_notification(table, frame.raw, indices, frame.ts_ns,
                                                      device, encoding))
        return get_response(notifications)

    def _set(self, request: Any) -> Any:
        paths = [u.path for u in (*request.replace, *request.update)] + list(request.delete)
        device = self._device(request.prefix, paths)
        frame = self._frame(device)
        values = settings_changes(request) if serves_settings(self.set_handler) else None
        if values is not None:
            return apply_settings(request, values, device, frame.ts_ns,
                                  self.set_handler)  # type: ignore[arg-type]
        return apply_set(request, device, frame, self.set_handler)

    def _subscribe(self, requests: Iterator[Any], context: Any) -> Iterator[bytes]:
        try:
            first = next(requests, None)  # read before any refusal, so the client's write lands
            self._authorize(context)
            if first is None or not first.HasField("subscribe"):
                raise GnmiError(_Code.INVALID_ARGUMENT,
                                "the first SubscribeRequest must carry a SubscriptionList")
            sub_list = first.subscribe
            device = self._device(sub_list.prefix, [s.path for s in sub_list.subscription])
            interval_ns = round(self.config.target_defined_interval_s * 1e9)
            state = StreamState(device, subscriptions_of(sub_list, interval_ns), self._tables,
                                check_encoding(sub_list.encoding, device))
            tick = self.board.tick
            frame = self._frame(device)
            self._metrics.rpcs.labels("Subscribe", "OK").inc()
            self._metrics.streams.inc()
            try:
                yield from self._serve(sub_list, state, frame, tick, requests, context)
            finally:
                self._metrics.streams.dec()
        except GnmiError as exc:
            self._metrics.rpcs.labels("Subscribe", exc.code.name).inc()
            context.abort(exc.code, exc.message)

    def _serve(self, sub_list: Any, state: StreamState, frame: Frame, tick: int,
               requests: Iterator[Any], context: Any) -> Iterator[bytes]:
        if sub_list.updates_only:
            state.prime(frame)
        else:
            yield from self._send(state, state.snapshot(frame))
        yield SYNC_RESPONSE
        if sub_list.mode == gnmi_pb2.SubscriptionList.ONCE:
            return
        if sub_list.mode == gnmi_pb2.SubscriptionList.POLL:
            for request in requests:
                if not request.HasField("poll"):
                    raise GnmiError(_Code.INVALID_ARGUMENT, "only Poll may follow a POLL "
                                    f"SubscriptionList (target {state.target!r})")
                yield from self._send(state, state.snapshot(self._frame(state.target)))
                yield SYNC_RESPONSE
            return
        last_ts = frame.ts_ns
        while not self._stopping.is_set() and context.is_active():
            now = self.board.wait_tick(tick, timeout_s=_TICK_WAIT_S)
            if now == tick:
                continue
            tick, frame = now, self._frame(state.target)
            if frame.ts_ns != last_ts:
                last_ts = frame.ts_ns
                yield from self._send(state, state.step(frame))

    def _send(self, state: StreamState, notification: bytes | None) -> Iterator[bytes]:
        if notification is None:
            return
        count = state.last_count
        yield subscribe_response(notification)
        self._metrics.notifications.inc()
        self._metrics.updates.inc(count)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OSError(f"gNMI target cannot read {what} {path}: {exc.strerror}") from exc
