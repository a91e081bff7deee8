"""Records for the store tests, and reference answers computed in Python.

Device names mix case, ``-``, ``_`` (a LIKE wildcard) and non-ASCII, so
ordering and matching differences between SQLite and PostgreSQL would show.
"""

from __future__ import annotations

from collections.abc import Sequence

from fabricops.core.frame import Frame, Source
from fabricops.core.records import Event, EventKind, Severity
from fabricops.store import IntPathRecord, SegmentRecord, SeriesRecord, Store, join_path

S = 1_000_000_000
T0 = 1_767_225_600 * S
DEVICES = ("leaf-0", "leaf_0", "Leaf-1", "leaf-ü", "spine-10", "spine-9")
SOURCES = ("gnmi", "snmp")


def segment(device: str, i: int, source: str = "gnmi") -> SegmentRecord:
    """Window ``i`` (60 s) of ``device``."""
    start = T0 + i * 60 * S
    return SegmentRecord(device, source, start, start + 59 * S, first_seq=i * 60,
                         last_seq=i * 60 + 59, n_points=1000 + i, n_series=10 + i,
                         encoding="keyframe/1", max_error=0.001 * i,
                         payload=bytes(range(256)) * (i % 3 + 1))


def segments() -> list[SegmentRecord]:
    return [segment(d, i, src) for d in DEVICES for src in SOURCES for i in range(6)]


def segments_overlapping(records: Sequence[SegmentRecord], t0_ns: int, t1_ns: int,
                         devices: Sequence[str] | None = None,
                         source: str | None = None) -> list[SegmentRecord]:
    hits = [r for r in records if r.t_start_ns <= t1_ns and r.t_end_ns >= t0_ns
            and (devices is None or r.device in devices)
            and (source is None or r.source == source)]
    return sorted(hits, key=lambda r: (r.device, r.source, r.t_start_ns, r.first_seq))


def series() -> list[SeriesRecord]:
    return [SeriesRecord(d, f"{d}:eth{p}", m, k) for d in DEVICES for p in range(3)
            for m, k in (("in_octets", "counter"), ("temperature_c", "gauge"))]


def events() -> list[Event]:
    """Two ports per device, one event per port every second; kinds and metrics vary."""
    kinds = list(EventKind)
    return [Event(ts_ns=T0 + i * S, device=d, entity=f"{d}:eth{p}",
                  metric=("in_fcs_errors", "oper_status")[i % 2], kind=kinds[(i + p) % 3],
                  value=i * 0.5 - p, severity=list(Severity)[i % 3], detail=f"#{i}")
            for d in DEVICES for p in range(2) for i in range(10)]


def events_matching(records: Sequence[Event], t0_ns: int, t1_ns: int, *,
                    devices: Sequence[str] | None = None,
                    entities: Sequence[str] | None = None, metric: str | None = None,
                    kind: EventKind | None = None, limit: int = 10_000) -> list[Event]:
    hits = [e for e in records if t0_ns <= e.ts_ns <= t1_ns
            and (devices is None or e.device in devices)
            and (entities is None or e.entity in entities)
            and (metric is None or e.metric == metric) and (kind is None or e.kind == kind)]
    return sorted(hits, key=lambda e: (e.ts_ns, e.entity, e.metric, e.kind.value))[:limit]


PATH_A = join_path([("leaf-0", "eth3"), ("spine-1", "eth0"), ("leaf-1", "eth7")])
PATH_B = join_path([("leaf-0", "eth4"), ("spine-10", "eth0"), ("leaf-1", "eth7")])
PATH_C = join_path([("leaf_0", "eth1"), ("spine-1", "eth2"), ("leafX0", None)])
PATH_D = join_path([("leafX0", "eth1"), ("spine-9", None)])


def int_path(path: str, first_s: int, last_s: int, n_reports: int = 5,
             latency_ns: int = 1000, sport: int = 49152, sink: str = "leaf-1") -> IntPathRecord:
    return IntPathRecord("10.0.0.1", "10.0.1.1", sport, 4791, 17, sink, path,
                         T0 + first_s * S, T0 + last_s * S, n_reports, latency_ns)


def int_paths() -> list[IntPathRecord]:
    return [int_path(PATH_A, 0, 10), int_path(PATH_B, 5, 20, sport=49153),
            int_path(PATH_C, 30, 40, sink="leafX0"), int_path(PATH_D, 50, 60, sink="spine-9"),
            int_path(PATH_A, 100, 110, sport=50000)]


def frame(device: str, k: int, source: Source = Source.GNMI) -> Frame:
    """Frame ``k`` (one per second), with values whose bits must survive: the
    largest counter, NaN, -0.0, infinities and a subnormal gauge."""
    ports = [f"{device}:eth{p}" for p in range(3)]
    gauges = [float("nan"), -0.0, float("inf"), float("-inf"), 5e-324, 0.1 * k]
    return Frame.build(device, T0 + k * S, source, k, ports * 4,
                       ["in_octets"] * 3 + ["oper_status"] * 3 + ["temperature_c"] * 6,
                       [2**64 - 1, k, 0, 1, 2, 7, *gauges])


def stage_three_streams(store: Store) -> None:
    """Frames 0..9 of leaf-0/gnmi, leaf-0/snmp and leaf-1/gnmi."""
    store.stage_frames([frame(d, k, src) for d, src in
                        (("leaf-0", Source.GNMI), ("leaf-0", Source.SNMP),
                         ("leaf-1", Source.GNMI)) for k in range(10)])
