"""Recorded SNMP agents as ``.snmprec`` files: read them, decode them, serve them.

A ``.snmprec`` file (snmpsim's format) holds one instance a line,
``OID|TAG|VALUE``: ``TAG`` is the BER tag number in decimal (2 INTEGER,
4 OCTET STRING, 6 OBJECT IDENTIFIER, 64 IpAddress, 65 Counter32, 66 Gauge32,
67 TimeTicks, 70 Counter64), suffixed ``x`` when ``VALUE`` is hex
(``4x|6c6f3000`` is ``b"lo0\\0"``); a ``:module`` suffix names an snmpsim
variation module and is kept as written. An OBJECT IDENTIFIER value is dotted
text in the file and its BER contents octets in a :class:`Record`, as the poller
reads it. Lines are in OID order. Fixtures live
in ``tests/collectors/walks/<name>.snmprec``, one recorded device each.

The API:

- ``read_snmprec(path)`` -> list of :class:`Record` ``(oid, tag, value)``;
  ``parse_snmprec(text)`` the same from text. A line that is not a record raises
  ``ValueError`` naming the line.
- ``write_snmprec(path, records)`` writes records back, sorted by OID.
- ``tables_of(records, columns)`` -> the decoder's ``Tables`` for ``columns``
  (any OID prefix: a column or a scalar), values as the poller passes them
  (``int`` or ``bytes``).
- ``snmpsim_agent(data_dir, max_varbinds=None)`` a context manager running a
  real snmpsim agent on a free loopback UDP port; it yields a
  :class:`SimAgent` (``host``, ``port``, ``communities``: one per ``.snmprec``
  file, named after it) and ``SimAgent.serve(other_dir)`` restarts it on the
  same port with other data (a device seen at a later poll). ``max_varbinds``
  cuts every GETBULK answer after that many varbinds, mid-row if it falls there,
  as agents that answer fewer varbinds than asked do (snmpsim's
  ``--max-var-binds`` does not reach pysnmp 7's responder, so the cut is made in
  pysnmp's ``BulkCommandResponder`` before snmpsim starts). Without it snmpsim
  answers at most 64 varbinds, in whole repetitions, and nothing at all to a
  GETBULK of more than 64 columns. When snmpsim
  cannot be run, the test is skipped with the reason (failed under
  ``FABRICOPS_REQUIRE_PEERS=1``). Use it inside a fixture of your own.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fabricops.collectors import snmp_decode as dec
from fabricops.core.snmp_mib import Column, Oid, ber_oid
from tests.conftest import missing_peer

WALKS = Path(__file__).parent / "walks"
NUMERIC_TAGS = frozenset((2, 64 + 1, 64 + 2, 64 + 3, 64 + 6))  # INTEGER, C32, G32, TT, C64
OBJECT_IDENTIFIER = 6  # its value is dotted text in the file, BER contents octets here
_START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Record:
    """One served instance: OID, BER tag number and value (``int``, or ``bytes``)."""

    oid: Oid
    tag: int
    value: int | bytes
    variation: str = ""  # ":module" as written after the tag, if any


def parse_snmprec(text: str, source: str = "snmprec") -> list[Record]:
    """Records of ``.snmprec`` text; ValueError names the first bad line."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            out.append(_record(line))
        except ValueError as exc:
            raise ValueError(f"{source}:{n}: {exc}: {line[:80]!r}") from None
    return out


def _record(line: str) -> Record:
    oid_text, tag_text, value_text = line.split("|", 2)
    tag_text, _, variation = tag_text.partition(":")
    hexed = tag_text.endswith("x")
    tag = int(tag_text.removesuffix("x"))
    oid = tuple(int(x) for x in oid_text.strip(".").split("."))
    value: int | bytes
    if tag == OBJECT_IDENTIFIER:
        dotted = tuple(int(x) for x in value_text.strip(".").split("."))
        value = ber_oid(dotted)[2:] if len(dotted) >= 2 else b""
    elif hexed:
        value = bytes.fromhex(value_text)
    elif tag in NUMERIC_TAGS:
        value = int(value_text)
    else:
        value = value_text.encode()
    return Record(oid, tag, value, f":{variation}" if variation else "")


def read_snmprec(path: str | Path) -> list[Record]:
    """Records of a ``.snmprec`` file."""
    p = Path(path)
    return parse_snmprec(p.read_text(), str(p))


def format_record(r: Record) -> str:
    """One ``.snmprec`` line (octets that are not printable ASCII are written hex)."""
    oid = ".".join(map(str, r.oid))
    if isinstance(r.value, int):
        return f"{oid}|{r.tag}{r.variation}|{r.value}"
    if r.tag == OBJECT_IDENTIFIER:
        return f"{oid}|{r.tag}{r.variation}|{'.'.join(map(str, dec.decode_oid(r.value)))}"
    text = r.value.decode("ascii", "replace")
    if r.value.isascii() and text.isprintable() and "|" not in text:
        return f"{oid}|{r.tag}{r.variation}|{text}"
    return f"{oid}|{r.tag}x{r.variation}|{r.value.hex()}"


def write_snmprec(path: str | Path, records: Iterable[Record]) -> Path:
    """Write ``records`` sorted by OID; return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(format_record(r) + "\n" for r in sorted(records, key=lambda r: r.oid)))
    return p


def tables_of(records: Sequence[Record], columns: Iterable[Column | Oid]) -> dec.Tables:
    """The rows of ``columns`` in ``records``, as the poller hands them to the decoder."""
    prefixes = [c.oid if isinstance(c, Column) else c for c in columns]
    tables: dict[Oid, dict[Oid, int | bytes]] = {p: {} for p in prefixes}
    for r in records:
        for p in prefixes:
            if r.oid[:len(p)] == p and len(r.oid) > len(p):
                tables[p][r.oid[len(p):]] = r.value
    return tables


@dataclass
class SimAgent:
    """A running snmpsim agent: where it listens and the communities it serves."""

    host: str
    port: int
    communities: list[str]
    max_varbinds: int | None = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _home: Path | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def serve(self, data_dir: str | Path) -> None:
        """Serve ``data_dir`` from now on (restarts the agent on the same port)."""
        self.stop()
        self._start(Path(data_dir))

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def _start(self, data_dir: Path) -> None:
        assert self._home is not None
        data = self._home / f"data-{time.monotonic_ns()}"
        shutil.copytree(data_dir, data)
        self.communities = sorted(p.stem for p in data.glob("*.snmprec"))
        cache = self._home / "cache"
        cache.mkdir(exist_ok=True)
        for p in (self._home, data, cache, *data.iterdir()):
            p.chmod(0o777 if p.is_dir() else 0o644)
        cap = "" if self.max_varbinds is None else _CAPPED.format(cap=self.max_varbinds)
        code = cap + "from snmpsim.commands.responder import main; main()"
        args = [sys.executable, "-c", code, f"--data-dir={data}", f"--cache-dir={cache}",
                f"--agent-udpv4-endpoint={self.host}:{self.port}", "--logging-method=null"]
        # As root snmpsim drops to a user of its own unless told not to; that user may
        # not read the interpreter (a Python under /root), and snmpsim imports lazily.
        env = {**os.environ, "SNMPSIM_ALLOW_ROOT": "true"}
        log = open(self._home / "agent.log", "ab")  # noqa: SIM115 - held by the process
        self._process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self._home, env=env)
        log.close()
        if not _answers(self.host, self.port, self.communities[0] if self.communities else
                        "public", self._process):
            tail = (self._home / "agent.log").read_text(errors="replace")[-600:]
            self.stop()
            missing_peer(f"snmpsim did not answer on {self.address}: {tail}")


_CAPPED = """
import pysnmp.entity.rfc3413.cmdrsp as cmdrsp
bulk = cmdrsp.BulkCommandResponder
bulk.max_varbinds = 1 << 20
send = bulk.send_varbinds
bulk.send_varbinds = lambda self, e, ref, st, ix, vbs: send(self, e, ref, st, ix, vbs[:{cap}])
"""


def free_udp_port() -> int:
    """A loopback UDP port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(host: str, port: int, community: str, process: subprocess.Popen[bytes]) -> bool:
    """Wait until the agent answers a GETBULK (or its process ends)."""
    request = dec.encode_getbulk(community.encode(), 1, [(1, 3, 6)], 0, 1)
    deadline = time.monotonic() + _START_TIMEOUT_S
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.2)
        while time.monotonic() < deadline and process.poll() is None:
            s.sendto(request, (host, port))
            try:
                s.recvfrom(65535)
                return True
            except OSError:
                continue
    return False


@contextmanager
def snmpsim_agent(data_dir: str | Path, max_varbinds: int | None = None) -> Iterator[SimAgent]:
    """A real snmpsim agent serving ``data_dir``'s ``.snmprec`` files on loopback UDP."""
    absent = [m for m in ("snmpsim", "pysmi") if importlib.util.find_spec(m) is None]
    if absent:
        missing_peer(f"{' and '.join(absent)} not installed; snmpsim serves the recorded walks")
    home = Path(tempfile.mkdtemp(prefix="fabricops-snmpsim-"))
    agent = SimAgent("127.0.0.1", free_udp_port(), [], max_varbinds, _home=home)
    try:
        agent._start(Path(data_dir))
        yield agent
    finally:
        agent.stop()
        shutil.rmtree(home, ignore_errors=True)


__all__ = ["WALKS", "Record", "SimAgent", "format_record", "free_udp_port", "parse_snmprec",
           "read_snmprec", "snmpsim_agent", "tables_of", "write_snmprec"]
