"""Validation traffic, judged: zero drops, bounded pause and marking, bandwidth near line rate.

A ``TrafficMeasurement`` is what one run of validation traffic showed: on the twin,
``fabricops.simulator.validation.run_traffic`` fills it; on real hosts, the outputs
of perftest's ``ib_write_bw`` and NCCL tests' ``all_reduce_perf`` do
(``parse_ib_write_bw``, ``parse_nccl``; the commands come from ``host_commands``).
``judge`` compares it with ``ValidationBounds`` and returns one verdict per
criterion, each with what was found, the bound and where.

Parsers are pure: text in, numbers out; a line they cannot read is skipped and
counted in the result (``skipped_lines``), and a value outside what a NIC can do
(negative, or beyond 1.6 Tb/s) is refused with ``ValueError`` naming it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

MAX_GBPS = 1600.0


class ValidationBounds(BaseModel):
    """What validation traffic must show to pass."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_drops: int = Field(0, ge=0, description="Packets dropped anywhere (RoCE is lossless)")
    max_pause_share: float = Field(0.01, ge=0, le=1,
                                   description="Largest share of time any port is paused")
    max_ecn_marked_share: float = Field(0.05, ge=0, le=1,
                                        description="Marked over transmitted packets")
    min_busbw_share: float = Field(0.75, ge=0, le=1,
                                   description="Mean achieved bandwidth over NIC line rate")


class TrafficMeasurement(BaseModel):
    """One validation run's result (field meanings: ``simulator.validation``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    hosts: list[str] = Field(default_factory=list)
    nics: int = Field(ge=0)
    seconds: float = Field(ge=0)
    busbw_share: float = Field(ge=0)
    worst_nic_share: float = Field(ge=0)
    worst_nic: str = ""
    drops: int = Field(ge=0)
    retransmits: int = Field(0, ge=0)
    pause_share_max: float = Field(0.0, ge=0, le=1)
    worst_pause_port: str = ""
    ecn_marked_share: float = Field(0.0, ge=0, le=1)
    pfc_priority: int = Field(3, ge=0, le=7)


@dataclass(frozen=True)
class Verdict:
    """One criterion: passed or not, found, the bound, where."""

    criterion: str
    ok: bool
    found: str
    bound: str
    where: str = ""


def judge(m: TrafficMeasurement, bounds: ValidationBounds) -> list[Verdict]:
    """One verdict per criterion of ``bounds``."""
    return [
        Verdict("drops", m.drops <= bounds.max_drops, f"{m.drops}", f"<= {bounds.max_drops}",
                f"{m.retransmits} RDMA retransmits"),
        Verdict("pause time", m.pause_share_max <= bounds.max_pause_share,
                f"{m.pause_share_max:.2%}", f"<= {bounds.max_pause_share:.2%}",
                m.worst_pause_port),
        Verdict("ECN marking", m.ecn_marked_share <= bounds.max_ecn_marked_share,
                f"{m.ecn_marked_share:.2%}", f"<= {bounds.max_ecn_marked_share:.2%}"),
        Verdict("bus bandwidth", m.busbw_share >= bounds.min_busbw_share,
                f"{m.busbw_share:.0%} of line", f">= {bounds.min_busbw_share:.0%}",
                f"worst {m.worst_nic} at {m.worst_nic_share:.0%}" if m.worst_nic else ""),
    ]


@dataclass(frozen=True)
class ParsedRun:
    """What a tool's output gave: bandwidth (Gb/s per NIC or GB/s bus), lines skipped."""

    value: float
    unit: str
    skipped_lines: int


_NUM = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def _gbps(value: float, what: str) -> float:
    if not 0 <= value <= MAX_GBPS:
        raise ValueError(f"{what} {value:g} Gb/s is outside 0..{MAX_GBPS:g}")
    return value


def parse_ib_write_bw(text: str) -> ParsedRun:
    """Average bandwidth (Gb/s) of an ``ib_write_bw --report_gbits`` run (the largest
    message size reported); ValueError if the output holds no result row."""
    best: tuple[int, float] | None = None
    skipped = 0
    gbits = "Gb/sec" in text
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].isdigit() and re.fullmatch(_NUM, parts[3]):
            size, avg = int(parts[0]), float(parts[3])
            avg = avg if gbits else avg * 8 / 1000  # MB/sec -> Gb/s
            if best is None or size >= best[0]:
                best = (size, _gbps(avg, f"ib_write_bw average at {size} bytes"))
        elif parts and parts[0].isdigit():
            skipped += 1
    if best is None:
        raise ValueError("ib_write_bw output has no result row (#bytes ... BW average)")
    return ParsedRun(best[1], "Gb/s", skipped)


def parse_nccl(text: str) -> ParsedRun:
    """Bus bandwidth (GB/s) of an nccl-tests run: its ``Avg bus bandwidth`` line, else the
    out-of-place busbw of the largest size; ValueError if neither is there."""
    skipped = 0
    rows: list[tuple[int, float]] = []
    for line in text.splitlines():
        avg = re.match(rf"#\s*Avg bus bandwidth\s*:\s*({_NUM})", line)
        if avg:
            return ParsedRun(_gbps(float(avg.group(1)) * 8, "NCCL average bus bandwidth") / 8,
                             "GB/s", skipped)
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if len(parts) >= 8 and parts[0].isdigit() and re.fullmatch(_NUM, parts[7]):
            rows.append((int(parts[0]), float(parts[7])))
        else:
            skipped += 1
    if not rows:
        raise ValueError("all_reduce_perf output has no result row and no 'Avg bus bandwidth'")
    size, busbw = max(rows)
    return ParsedRun(_gbps(busbw * 8, f"NCCL busbw at {size} bytes") / 8, "GB/s", skipped)


def host_commands(hosts: Sequence[str], *, rdma_devices: Sequence[str], gid_index: int = 3,
                  tos: int = 106, gpus_per_host: int = 8, mpirun: str = "mpirun") -> list[str]:
    """Commands to run validation on real hosts: ``ib_write_bw`` on every RDMA device
    between consecutive hosts (a ring; one server and one client line per pair), then
    NCCL's ``all_reduce_perf`` over every host. ``tos`` is the RoCE traffic class (DSCP
    26 with ECT(0) is 106)."""
    q = shlex.quote
    devs = " ".join(q(d) for d in rdma_devices)
    bw = (f"ib_write_bw -d $d -x {gid_index} --tclass={tos} -q 4 -s 65536 -D 10 "
          "--report_gbits -p $p")
    out = []
    for i, host in enumerate(hosts):
        peer = hosts[(i + 1) % len(hosts)]
        loop = f"p=18515; for d in {devs}; do {bw}{{}} & p=$((p+1)); done; wait"
        out.append(f"ssh {q(peer)} {q(loop.format(''))} &")
        out.append(f"sleep 2; ssh {q(host)} {q(loop.format(' ' + peer))}")
    n = len(hosts) * gpus_per_host
    out.append(f"{mpirun} -np {n} -H " + ",".join(f"{h}:{gpus_per_host}" for h in hosts)
               + f" -x NCCL_IB_TC={tos} -x NCCL_IB_GID_INDEX={gid_index} "
               "all_reduce_perf -b 8M -e 8G -f 2 -g 1")
    return out


__all__ = ["ParsedRun", "TrafficMeasurement", "ValidationBounds", "Verdict", "host_commands",
           "judge", "parse_ib_write_bw", "parse_nccl"]
