"""Readings of a host's NICs to one frame's columns: pure, no file system.

``evaluate`` turns one NIC's raw readings into catalogue values through its
``Binding``: a metric whose files gave a problem is left out of this sample
and the problem is returned (never dropped silently). ``CounterHistory``
remembers each counter's last value: a counter that goes back is a reset (a
driver reload or a NIC reset) and is reported, and the published value is
the new raw one (the pipeline starts its rate again). It also derives
``rdma_tx_rate_bps`` from ``out_octets`` between two samples.
``host_frame`` assembles the columns of every NIC into one Frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fabricops.agent.ethtool_text import ModuleReadings
from fabricops.agent.names import Binding, Choice, SourceName
from fabricops.agent.values import U64_MAX, Problem, Reason
from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source

Raw = Mapping[SourceName, Mapping[str, "int | Problem"]]


@dataclass
class NicReading:
    """What one sample read of one NIC, before mapping."""

    entity: str
    raw: dict[SourceName, dict[str, int | Problem]] = field(default_factory=dict)
    oper_status: int | Problem | None = None
    module: ModuleReadings | None = None
    problems: list[Problem] = field(default_factory=list)
    failed: set[SourceName] = field(default_factory=set)  # sources unreadable as a whole


@dataclass
class NicValues:
    """One NIC's catalogue values of one sample, and what could not be read."""

    entity: str
    counters: dict[str, int] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    states: dict[str, int] = field(default_factory=dict)
    extras: dict[str, int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def _sum(choice: Choice, raw: Raw, entity: str) -> int | Problem:
    values = raw.get(choice.source, {})
    total = 0
    for name in choice.names:
        v = values.get(name, Problem(f"{entity} {choice.source}:{name}", Reason.MISSING))
        if isinstance(v, Problem):
            return v
        total += v
    total *= choice.scale
    if total > U64_MAX:
        return Problem(f"{entity} {choice.source}:{'+'.join(choice.names)}",
                       Reason.OUT_OF_RANGE, f"{total} exceeds 2**64-1")
    return total


def _gauge(name: str, value: float, entity: str, out: NicValues) -> None:
    if value in CATALOGUE.by_name(name).valid:
        out.gauges[name] = value
    else:
        out.problems.append(Problem(f"{entity} {name}", Reason.OUT_OF_RANGE,
                                    f"{value:g} not in {CATALOGUE.by_name(name).valid}"))


def evaluate(binding: Binding, reading: NicReading) -> NicValues:
    """One NIC's values through ``binding`` (see the module docstring)."""
    out = NicValues(reading.entity, problems=list(reading.problems))
    for target, table in ((out.counters, binding.counters), (out.extras, binding.extras)):
        for metric, choice in table.items():
            if choice.source in reading.failed:
                continue
            v = _sum(choice, reading.raw, reading.entity)
            if isinstance(v, Problem):
                out.problems.append(v)
            else:
                target[metric] = v
    if isinstance(reading.oper_status, Problem):
        out.problems.append(reading.oper_status)
    elif reading.oper_status is not None:
        out.states["oper_status"] = reading.oper_status
    module = reading.module
    if module is not None:
        out.problems.extend(module.problems)
        for name, value in (("rx_power_dbm", module.rx_power_dbm),
                            ("tx_power_dbm", module.tx_power_dbm),
                            ("temperature_c", module.temperature_c)):
            if value is not None:
                _gauge(name, value, reading.entity, out)
    return out


@dataclass(frozen=True)
class Reset:
    """A counter that went back between two samples."""

    entity: str
    metric: str
    before: int
    after: int


class CounterHistory:
    """Last value and time of every (entity, counter): resets and the transmit rate."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], int] = {}
        self._ts: dict[str, int] = {}

    def update(self, values: NicValues, ts_ns: int) -> list[Reset]:
        """Note this sample's counters; add ``rdma_tx_rate_bps``; return the resets seen."""
        entity = values.entity
        resets = []
        for metric, value in values.counters.items():
            before = self._last.get((entity, metric))
            if before is not None and value < before:
                resets.append(Reset(entity, metric, before, value))
        prev_ts = self._ts.get(entity)
        prev_tx = self._last.get((entity, "out_octets"))
        tx = values.counters.get("out_octets")
        if prev_ts is not None and ts_ns > prev_ts and prev_tx is not None and tx is not None \
                and tx >= prev_tx:
            _gauge("rdma_tx_rate_bps", (tx - prev_tx) * 8e9 / (ts_ns - prev_ts), entity, values)
        for metric, value in values.counters.items():
            self._last[(entity, metric)] = value
        self._ts[entity] = ts_ns
        return resets


def host_frame(host: str, ts_ns: int, seq: int, nics: Sequence[NicValues]) -> Frame:
    """One frame of every NIC's values: counters, states, then gauges, NIC by NIC."""
    entities: list[str] = []
    metrics: list[str] = []
    values: list[int | float] = []
    for nic in nics:
        for table in (nic.counters, nic.states, nic.gauges):
            for metric, value in table.items():
                entities.append(nic.entity)
                metrics.append(metric)
                values.append(value)
    return Frame.build(host, ts_ns, Source.HOST, seq, entities, metrics, values)
