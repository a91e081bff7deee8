"""An SNMP agent on loopback that serves every switch of a frame board.

One UDP port, one pysnmp engine, many switches: SNMPv2c picks the switch by its
community (``community_template``, default the switch name) and SNMPv3 (USM
authPriv, HMAC-SHA-96 + AES-128) by the context name. The tables are those of
:mod:`fabricops.core.snmp_mib`, with optics and chassis sensors in an ENTITY-MIB
tree laid out as on a real switch (see
:mod:`fabricops.simulator.agents.snmp_entity_tree`); GET, GETNEXT and GETBULK are answered
from a sorted index of the switch's instances, with values read from the board's
frame of the moment. A switch that has no frame (down) gets no answer at all, as
do SNMPv1 requests and SNMPv3 requests below authPriv.

pysnmp decodes requests and builds and secures the response message; the response
varbinds are BER-encoded here (static instances once per layout) and handed to it
as one opaque value, which keeps a large GETBULK answer cheap.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from pyasn1.type import univ
from pydantic import BaseModel, ConfigDict, Field
from pysnmp.carrier.asyncio.dgram import udp
from pysnmp.carrier.error import CarrierError
from pysnmp.entity import config as snmp_config
from pysnmp.entity.engine import SnmpEngine
from pysnmp.proto import errind, rfc1905
from pysnmp.proto import error as proto_error
from pysnmp.proto.api import v2c

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.snmp_mib import (
    END_OF_MIB_VIEW,
    NO_SUCH_INSTANCE,
    NO_SUCH_OBJECT,
    DeviceMib,
    Oid,
    ber_tlv,
    ber_varbind,
)
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.lldp import Cabling, LldpMib
from fabricops.simulator.agents.snmp_entity_tree import OPTIC_METRICS, entity_cells

_HEADER_RESERVE_BYTES = 200  # message, security and PDU headers around the varbinds
_GET, _NEXT, _BULK = (rfc1905.GetRequestPDU.tagSet, rfc1905.GetNextRequestPDU.tagSet,
                      rfc1905.GetBulkRequestPDU.tagSet)
_PDU_NAMES = {_GET: "get", _NEXT: "getnext", _BULK: "getbulk"}


def _drop_late_requests(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """On stop: a request that arrived before the socket closed finds no engine; drop it.

    pysnmp hands each datagram to its dispatcher through the loop, so one may be
    queued when the transport is unregistered; it raises CarrierError, which a
    stopped agent has no one to answer for. Anything else is reported as usual.
    """
    if not isinstance(context.get("exception"), CarrierError):
        loop.default_exception_handler(context)


class SnmpAgentConfig(BaseModel):
    """Where the agent listens and which credentials it accepts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(default="127.0.0.1", description="IPv4 address to listen on")
    port: int = Field(default=0, ge=0, le=65535, description="0 picks a free port")
    community_template: str = Field(default="{device}",
                                    description="SNMPv2c community of a switch")
    v3_user: str = Field(default="fabricops", description="USM user; context = switch")
    v3_auth_key: str = Field(default="fabricops-auth", min_length=8,
                             description="HMAC-SHA-96 pass phrase")
    v3_priv_key: str = Field(default="fabricops-priv", min_length=8,
                             description="AES-128 pass phrase")
    max_message_bytes: int = Field(default=65507, ge=484, le=65507,
                                   description="Largest response message")
    max_bulk_varbinds: int = Field(default=1024, ge=1, description="Per GETBULK response")


@dataclass
class _Served:
    """A switch's instance index and the frame its values are read from."""

    mib: DeviceMib
    entities: tuple[str, ...]
    frame: Frame | None = None
    ints: list[int] = field(default_factory=list)
    floats: list[float] = field(default_factory=list)


def build_device_mib(device: str, frame: Frame) -> DeviceMib:
    """The instance index of a switch whose frames have ``frame``'s layout."""
    names = {m: CATALOGUE.by_id(m).name for m in set(frame.metric.tolist())}
    sample = {(e + 1, names[m]): i for i, (e, m) in
              enumerate(zip(frame.entity_idx.tolist(), frame.metric.tolist(), strict=True))}
    ifnames = [e.partition(":")[2] or e for e in frame.entities]
    ports = {k: i for k, i in sample.items() if k[1] not in OPTIC_METRICS}
    return DeviceMib(device, ifnames, ports, entity_cells(device, ifnames, sample))


class SnmpAgent:
    """Serves ``switches`` (their frames on ``board``) over SNMP on one UDP port.

    Inert until ``start``; ``port`` is the bound port once started. Requests are
    handled on the agent's own thread and event loop.
    """

    def __init__(self, config: SnmpAgentConfig, board: FrameBoard, switches: Sequence[str],
                 registry: CollectorRegistry | None = None, cabling: Cabling | None = None,
                 ) -> None:
        self.config = config
        self.board = board
        self.switches = tuple(switches)
        self.cabling = cabling  # when given, LLDP-MIB is served from it
        self.port = 0
        self._served: dict[str, _Served] = {}
        self._contexts: dict[bytes, str] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._engine: Any = None
        self._thread: threading.Thread | None = None
        reg = registry if registry is not None else CollectorRegistry()
        self.requests = Counter("fabricops_sim_snmp_requests", "SNMP requests answered",
                                ["pdu"], registry=reg)
        self.dropped = Counter("fabricops_sim_snmp_dropped", "SNMP requests left unanswered",
                               ["reason"], registry=reg)
        self.varbinds = Counter("fabricops_sim_snmp_varbinds", "Variable bindings answered",
                                registry=reg)

    def start(self) -> None:
        """Bind the UDP port and serve on a new thread; errors name the address."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((self.config.host, self.config.port))
        except OSError as exc:
            sock.close()
            raise OSError(f"SNMP agent cannot bind {self.config.host}:{self.config.port}: "
                          f"{exc.strerror}") from exc
        self.port = sock.getsockname()[1]
        ready: list[BaseException | None] = []
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(sock, ready, started),
                                        name="sim-snmp-agent", daemon=True)
        self._thread.start()
        started.wait()
        if ready[0] is not None:
            raise RuntimeError(f"SNMP agent on port {self.port} failed to start") from ready[0]

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._thread = self._loop = None

    def _run(self, sock: socket.socket, ready: list[BaseException | None],
             started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._configure(loop, sock)
            ready.append(None)
        except Exception as exc:
            ready.append(exc)
            sock.close()
            started.set()
            loop.close()
            return
        self._loop = loop
        started.set()
        try:
            loop.run_forever()
        finally:
            loop.set_exception_handler(_drop_late_requests)
            transport = snmp_config.get_transport(self._engine, udp.DOMAIN_NAME)
            if transport is not None:
                transport.close_transport()  # first: no new request (queued ones: dropped)
            self._engine.close_dispatcher()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    def _configure(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        """Engine, transport, one community per switch, the v3 user, the responder."""
        engine = self._engine = SnmpEngine()
        transport = udp.UdpAsyncioTransport(loop=loop).open_server_mode(sock=sock)
        snmp_config.add_transport(engine, udp.DOMAIN_NAME, transport)
        cfg = self.config
        for n, device in enumerate(self.switches):
            community = cfg.community_template.format(device=device)
            snmp_config.add_v1_system(engine, f"sw{n}", community, contextName=device.encode())
            self._contexts[device.encode()] = device
        snmp_config.add_v3_user(engine, cfg.v3_user, snmp_config.USM_AUTH_HMAC96_SHA,
                                cfg.v3_auth_key, snmp_config.USM_PRIV_CFB128_AES,
                                cfg.v3_priv_key)
        (engine_id,) = engine.get_mib_builder().import_symbols(
            "__SNMP-FRAMEWORK-MIB", "snmpEngineID")
        engine.message_dispatcher.register_context_engine_id(
            engine_id.syntax, (_GET, _NEXT, _BULK), self._process_pdu)

    def _process_pdu(self, engine: Any, mp_model: int, sec_model: int, sec_name: Any,
                     sec_level: int, context_engine_id: Any, context_name: Any,
                     pdu_version: int, pdu: Any, max_size: int, state_ref: Any) -> None:
        """pysnmp's callback for an authenticated request: answer it or drop it."""
        served, reason = self._target(mp_model, sec_model, sec_level, bytes(context_name))
        if served is None:
            self.dropped.labels(reason).inc()
            return
        tag = pdu.tagSet
        budget = min(int(max_size), self.config.max_message_bytes) - _HEADER_RESERVE_BYTES
        try:
            varbinds = self._answer(served, tag, pdu, budget)
        except Exception:  # a defect answering one request must not stop the agent
            self.dropped.labels("error").inc()
            return
        response = v2c.apiPDU.get_response(pdu)
        response.setComponentByPosition(
            3, univ.Any(ber_tlv(0x30, b"".join(varbinds))), verifyConstraints=False,
            matchTags=False, matchConstraints=False)
        try:
            engine.message_dispatcher.return_response_pdu(
                engine, mp_model, sec_model, sec_name, sec_level, context_engine_id,
                context_name, pdu_version, response, max_size, state_ref, {})
        except proto_error.StatusInformation as exc:
            too_big = exc.get("errorIndication") == errind.tooBig
            self.dropped.labels("too_big" if too_big else "send_failed").inc()
            return
        self.requests.labels(_PDU_NAMES[tag]).inc()
        self.varbinds.inc(len(varbinds))

    def _target(self, mp_model: int, sec_model: int, sec_level: int, context: bytes
                ) -> tuple[_Served | None, str]:
        """The switch a request is for, or None and why it is not answered."""
        if mp_model == 0:
            return None, "snmpv1"
        if sec_model == 3 and sec_level != 3:
            return None, "below_authpriv"
        device = self._contexts.get(context)
        if device is None:
            return None, "unknown_switch"
        frame = self.board.latest(device)
        if frame is None:
            return None, "switch_down"
        return self._refresh(device, frame), ""

    def _refresh(self, device: str, frame: Frame) -> _Served:
        """The switch's index and values for ``frame`` (rebuilt when the layout changes)."""
        served = self._served.get(device)
        if served is not None and served.frame is frame:
            return served
        if served is None or served.entities != frame.entities or len(served.ints) != len(
                frame.raw) or not _same_layout(served.frame, frame):
            mib = build_device_mib(device, frame)
            served = _Served(mib if self.cabling is None else LldpMib(mib, self.cabling),
                             frame.entities)
            self._served[device] = served
        served.frame = frame
        served.ints = frame.raw.tolist()
        served.floats = frame.raw.view("<f8").tolist()
        return served

    def _answer(self, served: _Served, tag: Any, pdu: Any, budget: int) -> list[bytes]:
        """The encoded varbinds answering a request."""
        oids = [tuple(name) for name, _ in v2c.apiPDU.get_varbinds(pdu)]
        if tag == _GET:
            return [self._get(served, oid) for oid in oids]
        if tag == _NEXT:
            return [self._varbind(served, bisect_right(served.mib.oids, oid), oid)
                    for oid in oids]
        non_rep = max(0, int(v2c.apiBulkPDU.get_non_repeaters(pdu)))
        max_rep = max(0, int(v2c.apiBulkPDU.get_max_repetitions(pdu)))
        return self._bulk(served, oids, min(non_rep, len(oids)), max_rep, budget)

    def _bulk(self, served: _Served, oids: list[Oid], n: int, m: int, budget: int
              ) -> list[bytes]:
        """GETBULK: ``n`` non-repeaters, then up to ``m`` rows, within ``budget`` bytes."""
        size, out, used = len(served.mib), list[bytes](), 0
        starts = [bisect_right(served.mib.oids, oid) for oid in oids]
        limit = self.config.max_bulk_varbinds
        for rep in range(m + 1):
            todo = range(n) if rep == 0 else range(n, len(oids))
            if rep > 1 and all(starts[r] + rep - 2 >= size for r in todo):
                break
            for r in todo:
                varbind = self._varbind(served, starts[r] + max(0, rep - 1), oids[r])
                used += len(varbind)
                if used > budget or len(out) >= limit:
                    return out
                out.append(varbind)
        return out

    def _get(self, served: _Served, oid: Oid) -> bytes:
        i = served.mib.position.get(oid)
        if i is not None:
            return self._varbind(served, i, oid)
        missing = NO_SUCH_INSTANCE if served.mib.knows_object(oid) else NO_SUCH_OBJECT
        return ber_varbind(oid, missing)

    def _varbind(self, served: _Served, i: int, asked: Oid) -> bytes:
        """Encoded varbind of cell ``i``; endOfMibView past the last cell."""
        mib = served.mib
        if i >= len(mib):
            last = max(asked, mib.oids[-1]) if len(mib) else asked
            return ber_varbind(last, END_OF_MIB_VIEW)
        return mib.varbind(i, served.ints, served.floats)


def _same_layout(old: Frame | None, new: Frame) -> bool:
    return old is not None and bool(
        (old.metric == new.metric).all() and (old.entity_idx == new.entity_idx).all())
