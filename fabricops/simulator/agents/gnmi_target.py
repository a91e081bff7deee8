"""A gNMI target on loopback that serves every switch of a frame board.

One gRPC server, many switches: a request's ``prefix.target`` (or its first
path's ``target``) names the switch; an unknown name is NOT_FOUND and a switch
that has no frame (down) is UNAVAILABLE, mid-stream too. Capabilities, Get
(by data type, :mod:`~fabricops.simulator.agents.gnmi_get`), Subscribe (STREAM
with SAMPLE / ON_CHANGE / TARGET_DEFINED, ONCE, POLL; the schedule is in device
time, :mod:`~fabricops.simulator.agents.gnmi_stream`), Set of a port's
``config/enabled``, of the switch's ECMP hash fields
(:mod:`~fabricops.simulator.agents.gnmi_set`) and of the running RoCE settings
when the Set handler carries them (:mod:`~fabricops.simulator.agents.gnmi_running`).

As the gNMI specification (0.8.0) asks: encodings JSON (the default of a
request that names none), JSON_IETF and PROTO, values typed as
:mod:`~fabricops.simulator.agents.gnmi_typed` says; BYTES and ASCII are
UNIMPLEMENTED and a number outside the enumeration INVALID_ARGUMENT, each
counted. A request's ``prefix.target`` and ``prefix.origin`` come back in the
prefix of every notification and SetResponse, and nothing when the request set
none (2.2.2.1). Timestamps are the device time the values were collected: the
frame's (ns since the epoch), never later than the newest frame. Optional TLS
and a username/password checked on every RPC (gRPC metadata ``username`` and
``password``); a wrong or missing one is UNAUTHENTICATED.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.core.frame import Frame
from fabricops.core.openconfig import OpenConfigSchema
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.gnmi_clock import DeviceClock
from fabricops.simulator.agents.gnmi_encode import (
    SYNC_RESPONSE,
    LeafTables,
    prefix_bytes,
    subscribe_response,
)
from fabricops.simulator.agents.gnmi_get import GetContext, get_answer
from fabricops.simulator.agents.gnmi_running import (
    apply_settings,
    serves_settings,
    settings_changes,
)
from fabricops.simulator.agents.gnmi_set import SetHandler, apply_set
from fabricops.simulator.agents.gnmi_stream import (
    SUPPORTED_ENCODINGS,
    GnmiError,
    StreamState,
    check_encoding,
    subscriptions_of,
)
from fabricops.simulator.agents.gnmi_typed import Decimal64Proto, value_encoder
from fabricops.simulator.agents.lldp import Cabling

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
    decimal64: Decimal64Proto = Field(
        default=Decimal64Proto.DOUBLE_VAL, description="How decimal64 leaves go out with PROTO "
        "encoding: double_val (gNMI 0.7.0 and later) or the deprecated decimal_val")

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
        self.repeats = Counter("fabricops_sim_gnmi_repeated_samples",
                               "Notifications sent between two frames (samples due more often "
                               "than frames come: the newest frame's values again)",
                               registry=registry)
        self.refused_encodings = Counter("fabricops_sim_gnmi_refused_encodings",
                                         "Requests refused for their encoding, by method and "
                                         "encoding number", ["method", "encoding"],
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
        self._clock = DeviceClock()
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
        user = str(metadata.get("username", "")).encode()
        given = str(metadata.get("password", "")).encode()
        password = self.config.password.get_secret_value().encode()
        if not (hmac.compare_digest(user, self.config.username.encode())
                & hmac.compare_digest(given, password)):
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
            supported_encodings=list(SUPPORTED_ENCODINGS))

    def _encoding(self, method: str, encoding: int, device: str) -> int:
        try:
            return check_encoding(encoding, device)
        except GnmiError:
            self._metrics.refused_encodings.labels(method, str(encoding)).inc()
            raise

    def _get(self, request: Any) -> bytes:
        """One notification per requested path (the whole tree if none), of the data type
        asked for (see ``gnmi_get``)."""
        device = self._device(request.prefix, request.path)
        encoding = self._encoding("Get", request.encoding, device)
        frame = self._frame(device)
        cfg = self.config
        return get_answer(request, GetContext(
            device, frame, self._tables.of(frame), _echo(request.prefix), encoding,
            value_encoder(encoding, cfg.decimal64), self.set_handler, self.cabling,
            cfg.queue_name))

    def _set(self, request: Any) -> Any:
        paths = [u.path for u in (*request.replace, *request.update)] + list(request.delete)
        device = self._device(request.prefix, paths)
        frame = self._frame(device)
        values = settings_changes(request) if serves_settings(self.set_handler) else None
        if values is not None:
            response = apply_settings(request, values, device, frame.ts_ns,
                                      self.set_handler)  # type: ignore[arg-type]
        else:
            response = apply_set(request, device, frame, self.set_handler)
        response.ClearField("prefix")
        echo = _echo(request.prefix)
        if echo:
            response.prefix.MergeFromString(echo)
        return response

    def _subscribe(self, requests: Iterator[Any], context: Any) -> Iterator[bytes]:
        try:
            first = next(requests, None)  # read before any refusal, so the client's write lands
            self._authorize(context)
            if first is None or not first.HasField("subscribe"):
                raise GnmiError(_Code.INVALID_ARGUMENT,
                                "the first SubscribeRequest must carry a SubscriptionList")
            sub_list = first.subscribe
            device = self._device(sub_list.prefix, [s.path for s in sub_list.subscription])
            encoding = self._encoding("Subscribe", sub_list.encoding, device)
            interval_ns = round(self.config.target_defined_interval_s * 1e9)
            state = StreamState(device, subscriptions_of(sub_list, interval_ns, device),
                                self._tables, encoding, _echo(sub_list.prefix),
                                value_encoder(encoding, self.config.decimal64))
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
        yield from self._stream(state, frame, tick, context)

    def _stream(self, state: StreamState, frame: Frame, tick: int,
                context: Any) -> Iterator[bytes]:
        """STREAM: each new frame's due leaves, and between frames the samples due before
        the next one (paced by ``DeviceClock``, stamped with the newest frame's time)."""
        clock = self._clock
        while not self._stopping.is_set() and context.is_active():
            spacing = clock.spacing_ns()
            repeat_ns = state.next_repeat_ns(frame, frame.ts_ns + spacing) if spacing else None
            send_at = None if repeat_ns is None else clock.mono_at(repeat_ns)
            wait_s = _TICK_WAIT_S if send_at is None else \
                min(_TICK_WAIT_S, max(0.0, (send_at - time.monotonic_ns()) / 1e9))
            now = self.board.wait_tick(tick, timeout_s=wait_s)
            if now != tick:
                newest = self._frame(state.target)
                clock.observe(now, newest.ts_ns, time.monotonic_ns())
                tick, previous, frame = now, frame, newest
                if frame.ts_ns != previous.ts_ns:
                    yield from self._send(state, state.step(frame))
            elif repeat_ns is not None and send_at is not None \
                    and time.monotonic_ns() >= send_at:
                sent = state.repeat(frame, repeat_ns)
                if sent is not None:
                    self._metrics.repeats.inc()
                yield from self._send(state, sent)

    def _send(self, state: StreamState, notification: bytes | None) -> Iterator[bytes]:
        if notification is None:
            return
        count = state.last_count
        yield subscribe_response(notification)
        self._metrics.notifications.inc()
        self._metrics.updates.inc(count)


def _echo(prefix: Any) -> bytes:
    """The serialized prefix of a response to a request with ``prefix``: its target and
    origin, which the request set or not."""
    return prefix_bytes(prefix.target, prefix.origin)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OSError(f"gNMI target cannot read {what} {path}: {exc.strerror}") from exc
