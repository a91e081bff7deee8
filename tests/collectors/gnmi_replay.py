"""A gNMI target that replays recorded SubscribeResponses over real gRPC, and its fixtures.

``ReplayTarget`` serves ``gnmi.gNMI`` (Capabilities, Subscribe) on 127.0.0.1,
plain or TLS. Each Subscribe gets the recorded responses in order (serialized
protobuf, or raw bytes to send a truncated or garbage message), then the
stream stays open and silent until the client leaves. The requests it
received are kept for inspection.

Replays live in ``gnmi_replays/<dialect>.json``: notifications written from
each vendor's published YANG models and documentation, in a compact form
(``load_replay``): a prefix and update paths as path text (``origin:/path``),
values as one of ``uint``, ``int``, ``double``, ``string``, ``ascii``,
``bool``, ``decimal`` ([digits, precision]), ``json`` or ``json_ietf`` (any
JSON document, serialized here), or ``json_ietf_raw`` (text sent as is).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_config import split_origin

REPLAYS = Path(__file__).parent / "gnmi_replays"
REPLAY_TS_NS = 1_767_225_600_000_000_000
"""A notification's timestamp where its replay gives none."""


def gnmi_path(text: str, target: str = "") -> Any:
    """Path text (``origin:/a/b[k=v]``) as a ``gnmi.Path``."""
    origin, path = split_origin(text)
    return gnmi_pb2.Path(origin=origin, target=target, elem=[
        gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path])


def typed_value(spec: dict[str, Any]) -> Any:
    """A ``gnmi.TypedValue`` from one replay value (see the module docstring)."""
    (kind, raw), = ((k, v) for k, v in spec.items() if k != "path")
    if kind in ("json", "json_ietf"):
        return gnmi_pb2.TypedValue(**{f"{kind}_val": json.dumps(raw).encode()})
    if kind == "json_ietf_raw":
        return gnmi_pb2.TypedValue(json_ietf_val=raw.encode())
    if kind == "decimal":
        return gnmi_pb2.TypedValue(decimal_val=gnmi_pb2.Decimal64(digits=raw[0],
                                                                  precision=raw[1]))
    field = kind if kind == "proto_bytes" else f"{kind}_val"
    return gnmi_pb2.TypedValue(**{field: raw})


def notification(note: dict[str, Any]) -> Any:
    prefix = note.get("prefix", {})
    return gnmi_pb2.Notification(
        timestamp=note.get("timestamp", REPLAY_TS_NS),
        prefix=gnmi_path(prefix.get("path", ""), prefix.get("target", "")),
        update=[gnmi_pb2.Update(path=gnmi_path(u["path"]), val=typed_value(u))
                for u in note.get("update", [])],
        delete=[gnmi_path(d) for d in note.get("delete", [])])


@dataclass(frozen=True)
class Replay:
    """One dialect's recorded stream: its profile and its responses, sync at the end."""

    profile: str
    responses: list[bytes]
    notifications: list[Any]


def load_replay(name: str) -> Replay:
    doc = json.loads((REPLAYS / f"{name}.json").read_text())
    notes = [notification(n) for n in doc["notifications"]]
    responses = [gnmi_pb2.SubscribeResponse(update=n).SerializeToString() for n in notes]
    responses.append(gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString())
    return Replay(doc["profile"], responses, notes)


class ReplayTarget:
    """A gNMI server on 127.0.0.1 replaying ``responses`` to every Subscribe."""

    def __init__(self, responses: list[bytes], *, tls: tuple[bytes, bytes] | None = None,
                 client_ca: bytes | None = None, pause_s: float = 0.0) -> None:
        self.responses = responses
        self.requests: list[Any] = []
        self.subscribes = 0
        self._pause_s = pause_s
        self._stopping = threading.Event()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.method_handlers_generic_handler("gnmi.gNMI", {
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                self._subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString,
                response_serializer=bytes),
            "Capabilities": grpc.unary_unary_rpc_method_handler(
                self._capabilities,
                request_deserializer=gnmi_pb2.CapabilityRequest.FromString,
                response_serializer=gnmi_pb2.CapabilityResponse.SerializeToString),
        })
        self._server.add_generic_rpc_handlers((handler,))
        if tls is None:
            self.port = self._server.add_insecure_port("127.0.0.1:0")
        else:
            creds = grpc.ssl_server_credentials([tls], root_certificates=client_ca,
                                                require_client_auth=client_ca is not None)
            self.port = self._server.add_secure_port("127.0.0.1:0", creds)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ReplayTarget:
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.stop(grace=None)

    def _capabilities(self, request: Any, context: Any) -> Any:
        return gnmi_pb2.CapabilityResponse(supported_encodings=[
            gnmi_pb2.JSON, gnmi_pb2.JSON_IETF, gnmi_pb2.PROTO, gnmi_pb2.ASCII])

    def _subscribe(self, requests: Iterator[Any], context: Any) -> Iterator[bytes]:
        self.requests.append(next(requests))
        self.subscribes += 1
        for response in self.responses:
            if self._pause_s:
                time.sleep(self._pause_s)
            yield response
        while context.is_active() and not self._stopping.is_set():
            time.sleep(0.02)
