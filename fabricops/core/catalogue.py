"""The metric catalogue: every metric defined once.

Each metric has a canonical name, a kind (which decides how the pipeline
compresses it), a unit, the scope of entity it is measured on, and its mapping
from each source protocol. A metric family with a label (``pfc_rx_pause{prio}``)
expands to one concrete metric per label value, e.g. ``pfc_rx_pause{prio=3}``.

Concrete metric ids are small stable integers: they are what frames carry on
the wire, so an id is never reused for another metric.

Each family also says which values are plausible readings (``ValueRange``):
counters any unsigned 64-bit integer, states their enumeration, gauges a
finite number within physical limits. Collectors reject a reading outside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, Final

import numpy as np
import numpy.typing as npt


class MetricKind(StrEnum):
    """How a metric behaves over time."""

    COUNTER = "counter"  # monotonic unsigned 64-bit, may wrap or reset
    GAUGE = "gauge"  # instantaneous float value
    STATE = "state"  # small integer enumeration, changes rarely


class Scope(StrEnum):
    """What kind of entity a metric is measured on."""

    PORT = "port"
    NIC = "nic"
    INT_HOP = "int_hop"
    SWITCH = "switch"  # the device itself: chassis sensors


@dataclass(frozen=True)
class SourceMap:
    """Where a metric comes from in each protocol; ``None`` means not provided."""

    snmp_oid: str | None = None
    openconfig_path: str | None = None
    int_field: str | None = None


@dataclass(frozen=True)
class ValueRange:
    """Plausible values of a metric, in its unit: finite and ``low <= value <= high``.

    Bounds of counters and states are ints: their values must be whole numbers,
    and the check is exact up to 2**64-1.
    """

    low: int | float
    high: int | float

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if isinstance(value, float) and not (
                math.isfinite(value) and (value.is_integer() or not self._whole)):
            return False
        return self.low <= value <= self.high

    @property
    def _whole(self) -> bool:
        return isinstance(self.low, int) and isinstance(self.high, int)

    def __str__(self) -> str:
        low, high = (f"{b}" if isinstance(b, int) else f"{b:g}" for b in (self.low, self.high))
        return f"[{low}, {high}]"


U64_RANGE: Final = ValueRange(0, 2**64 - 1)
"""Every counter: an unsigned 64-bit integer (wraps and resets are the pipeline's)."""
ANY_FINITE: Final = ValueRange(-math.inf, math.inf)
NON_NEGATIVE: Final = ValueRange(0.0, math.inf)
OPTICAL_POWER_DBM: Final = ValueRange(-100.0, 30.0)
"""Down to a dark receiver (``snmp_mib.DARK_DBM``, -60) and the 0.1 nW step of a watts
sensor (-70 dBm); no transceiver sends 1 W (+30 dBm)."""
TEMPERATURE_C: Final = ValueRange(-60.0, 200.0)
BIAS_CURRENT_MA: Final = ValueRange(0.0, 500.0)
SUPPLY_VOLTAGE_V: Final = ValueRange(0.0, 20.0)
FAN_SPEED_RPM: Final = ValueRange(0.0, 100_000.0)
PSU_POWER_W: Final = ValueRange(0.0, 100_000.0)
IF_OPER_STATUS: Final = ValueRange(1, 7)
"""IF-MIB ifOperStatus: up(1) .. lowerLayerDown(7)."""


@dataclass(frozen=True)
class MetricFamily:
    """One catalogue row. ``first_id`` is the id of its first concrete metric."""

    name: str
    kind: MetricKind
    unit: str
    scope: Scope
    first_id: int
    description: str
    label: str | None = None
    label_values: tuple[int, ...] = ()
    sources: SourceMap = field(default_factory=SourceMap)
    valid: ValueRange = U64_RANGE


@dataclass(frozen=True)
class Metric:
    """A concrete metric: a family, and for labelled families one label value."""

    id: int
    name: str
    family: MetricFamily
    label_value: int | None = None

    @property
    def kind(self) -> MetricKind:
        return self.family.kind

    @property
    def valid(self) -> ValueRange:
        return self.family.valid


PRIORITIES = tuple(range(8))
_IF = "1.3.6.1.2.1.2.2.1"
_IFX = "1.3.6.1.2.1.31.1.1.1"
_CPFC = "1.3.6.1.4.1.9.9.813.1.2.1"  # cpfcIfPriorityTable: .<ifIndex>.<priority>
_SENSOR = "1.3.6.1.2.1.99.1.1.1.4"  # entPhySensorValue (see fabricops.core.snmp_mib)
_OC_IF = "/interfaces/interface/state"
_OC_CNT = f"{_OC_IF}/counters"
_OC_QOS = "/qos/interfaces/interface/output/queues/queue/state"
_OC_PFC = "/qos/interfaces/interface/pfc/priorities/priority/state"
_OC_XCVR = "/components/component/transceiver/physical-channels/channel/state"
_OC_NIC = "/nics/nic/state/counters"


def _fam(
    name: str,
    kind: MetricKind,
    unit: str,
    scope: Scope,
    first_id: int,
    description: str,
    *,
    snmp: str | None = None,
    oc: str | None = None,
    int_field: str | None = None,
    label: str | None = None,
    valid: ValueRange | None = None,
) -> MetricFamily:
    return MetricFamily(
        name=name,
        kind=kind,
        unit=unit,
        scope=scope,
        first_id=first_id,
        description=description,
        label=label,
        label_values=PRIORITIES if label else (),
        sources=SourceMap(snmp_oid=snmp, openconfig_path=oc, int_field=int_field),
        valid=valid or (ANY_FINITE if kind is MetricKind.GAUGE else U64_RANGE),
    )


C, G, S = MetricKind.COUNTER, MetricKind.GAUGE, MetricKind.STATE
P, N, H = Scope.PORT, Scope.NIC, Scope.INT_HOP
W = Scope.SWITCH

FAMILIES: tuple[MetricFamily, ...] = (
    _fam("in_octets", C, "bytes", P, 1, "Octets received, errored frames included",
         snmp=f"{_IFX}.6", oc=f"{_OC_CNT}/in-octets"),
    _fam("out_octets", C, "bytes", P, 2, "Octets transmitted",
         snmp=f"{_IFX}.10", oc=f"{_OC_CNT}/out-octets"),
    _fam("in_pkts", C, "packets", P, 3, "Good unicast packets received",
         snmp=f"{_IFX}.7", oc=f"{_OC_CNT}/in-unicast-pkts"),
    _fam("out_pkts", C, "packets", P, 4, "Unicast packets transmitted",
         snmp=f"{_IFX}.11", oc=f"{_OC_CNT}/out-unicast-pkts"),
    _fam("in_errors", C, "packets", P, 5, "Received packets discarded for errors",
         snmp=f"{_IF}.14", oc=f"{_OC_CNT}/in-errors"),
    _fam("in_fcs_errors", C, "packets", P, 6, "Received frames with a bad FCS (CRC)",
         snmp="1.3.6.1.2.1.10.7.2.1.3", oc=f"{_OC_CNT}/in-fcs-errors"),
    _fam("in_discards", C, "packets", P, 7, "Received packets dropped without error",
         snmp=f"{_IF}.13", oc=f"{_OC_CNT}/in-discards"),
    _fam("out_discards", C, "packets", P, 8, "Packets dropped at egress",
         snmp=f"{_IF}.19", oc=f"{_OC_CNT}/out-discards"),
    _fam("oper_status", S, "state", P, 9, "IF-MIB ifOperStatus: 1 up, 2 down",
         snmp=f"{_IF}.8", oc=f"{_OC_IF}/oper-status", valid=IF_OPER_STATUS),
    _fam("carrier_transitions", C, "transitions", P, 10, "Link up/down transitions",
         oc=f"{_OC_CNT}/carrier-transitions"),
    _fam("ecn_marked_pkts", C, "packets", P, 11, "Packets ECN-marked (CE) at egress",
         oc=f"{_OC_QOS}/ecn-marked-pkts"),
    _fam("queue_depth_bytes", G, "bytes", P, 12, "Egress queue depth of the lossless class",
         oc=f"{_OC_QOS}/instant-queue-len", valid=NON_NEGATIVE),
    _fam("queue_watermark_bytes", G, "bytes", P, 13,
         "Highest egress queue depth since the previous sample",
         oc=f"{_OC_QOS}/max-queue-len", valid=NON_NEGATIVE),
    _fam("pfc_rx_pause", C, "frames", P, 16, "PFC pause frames received, per priority",
         snmp=f"{_CPFC}.3", oc=f"{_OC_PFC}/in-pause-frames", label="prio"),
    _fam("pfc_tx_pause", C, "frames", P, 24, "PFC pause frames sent, per priority",
         snmp=f"{_CPFC}.2", oc=f"{_OC_PFC}/out-pause-frames", label="prio"),
    _fam("rx_power_dbm", G, "dBm", P, 32, "Optical receive power",
         snmp=_SENSOR, oc=f"{_OC_XCVR}/input-power/instant", valid=OPTICAL_POWER_DBM),
    _fam("tx_power_dbm", G, "dBm", P, 33, "Optical transmit power",
         snmp=_SENSOR, oc=f"{_OC_XCVR}/output-power/instant", valid=OPTICAL_POWER_DBM),
    _fam("temperature_c", G, "celsius", P, 34, "Transceiver temperature",
         snmp=_SENSOR, oc="/components/component/state/temperature/instant",
         valid=TEMPERATURE_C),
    _fam("tx_bias_ma", G, "mA", P, 35, "Transceiver laser bias current (highest lane)",
         snmp=_SENSOR, valid=BIAS_CURRENT_MA),
    _fam("supply_voltage_v", G, "V", P, 36, "Transceiver supply voltage",
         snmp=_SENSOR, valid=SUPPLY_VOLTAGE_V),
    _fam("fan_speed_rpm", G, "rpm", W, 37, "Slowest chassis fan", snmp=_SENSOR,
         valid=FAN_SPEED_RPM),
    _fam("chassis_temperature_c", G, "celsius", W, 38, "Hottest chassis temperature sensor",
         snmp=_SENSOR, valid=TEMPERATURE_C),
    _fam("psu_power_w", G, "W", W, 39, "Power drawn, summed over power supplies",
         snmp=_SENSOR, valid=PSU_POWER_W),
    _fam("cnp_sent", C, "packets", N, 40, "Congestion notification packets sent (as receiver)",
         oc=f"{_OC_NIC}/cnp-sent"),
    _fam("cnp_handled", C, "packets", N, 41, "CNPs received and acted on (as sender)",
         oc=f"{_OC_NIC}/cnp-handled"),
    _fam("rdma_retransmits", C, "packets", N, 42, "RDMA packets retransmitted (go-back-N)",
         oc=f"{_OC_NIC}/retransmits"),
    _fam("out_of_sequence", C, "events", N, 43, "Out-of-sequence packets detected (as receiver)",
         oc=f"{_OC_NIC}/out-of-sequence"),
    _fam("rdma_tx_rate_bps", G, "bits/s", N, 44, "RDMA transmit rate",
         oc="/nics/nic/state/tx-rate", valid=NON_NEGATIVE),
    _fam("hop_latency_ns", G, "ns", H, 50, "INT hop latency", int_field="hop_latency",
         valid=NON_NEGATIVE),
    _fam("queue_occupancy", G, "cells", H, 51, "INT queue occupancy",
         int_field="queue_occupancy", valid=NON_NEGATIVE),
    _fam("egress_tx_util", G, "ratio", H, 52, "INT egress port tx utilization",
         int_field="egress_port_tx_utilization", valid=NON_NEGATIVE),
)


class UnknownMetricError(KeyError):
    """A metric name or id that the catalogue does not define."""


class Catalogue:
    """Lookup of concrete metrics by name and id, and per-id arrays for hot paths."""

    def __init__(self, families: tuple[MetricFamily, ...] = FAMILIES) -> None:
        metrics: list[Metric] = []
        for fam in families:
            if fam.label is None:
                metrics.append(Metric(fam.first_id, fam.name, fam))
                continue
            for offset, value in enumerate(fam.label_values):
                name = f"{fam.name}{{{fam.label}={value}}}"
                metrics.append(Metric(fam.first_id + offset, name, fam, value))
        self.families = {f.name: f for f in families}
        self.metrics = tuple(metrics)
        self._by_name = {m.name: m for m in metrics}
        self._by_id = {m.id: m for m in metrics}
        if len(self._by_id) != len(metrics):
            raise ValueError("metric ids overlap in the catalogue")

    def __len__(self) -> int:
        return len(self.metrics)

    def by_name(self, name: str) -> Metric:
        try:
            return self._by_name[name]
        except KeyError:
            raise UnknownMetricError(f"unknown metric {name!r}") from None

    def by_id(self, metric_id: int) -> Metric:
        try:
            return self._by_id[int(metric_id)]
        except KeyError:
            raise UnknownMetricError(f"unknown metric id {metric_id}") from None

    def id_of(self, name: str) -> int:
        return self.by_name(name).id

    def of_scope(self, scope: Scope) -> tuple[Metric, ...]:
        return tuple(m for m in self.metrics if m.family.scope is scope)

    @cached_property
    def max_id(self) -> int:
        return max(self._by_id)

    @cached_property
    def is_float(self) -> npt.NDArray[np.bool_]:
        """Indexed by metric id: True where the value is a float (gauges)."""
        return self._of_kind(MetricKind.GAUGE)

    @cached_property
    def is_counter(self) -> npt.NDArray[np.bool_]:
        """Indexed by metric id: True where the metric is a counter."""
        return self._of_kind(MetricKind.COUNTER)

    def _of_kind(self, kind: MetricKind) -> npt.NDArray[np.bool_]:
        table = np.zeros(self.max_id + 1, dtype=bool)
        table[[m.id for m in self.metrics if m.kind is kind]] = True
        return table

    @cached_property
    def is_known(self) -> npt.NDArray[np.bool_]:
        """Indexed by metric id: True where the id names a metric."""
        table = np.zeros(self.max_id + 1, dtype=bool)
        table[list(self._by_id)] = True
        return table

    @cached_property
    def valid_bounds(self) -> npt.NDArray[np.float64]:
        """Indexed by metric id: (low, high) of ``valid`` as float64 (counters unbounded)."""
        table = np.zeros((self.max_id + 1, 2), dtype=np.float64)
        for m in self.metrics:
            wide = m.kind is MetricKind.COUNTER  # any raw u64 is a counter value
            table[m.id] = (-math.inf, math.inf) if wide else (m.valid.low, m.valid.high)
        return table

    def out_of_range(self, metric: npt.NDArray[np.integer[Any]],
                     raw: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Per sample of a frame's columns: True where the value is outside ``valid``.

        ``raw`` holds gauges as float64 bits, counters and states as integers (see
        :mod:`fabricops.core.frame`); a non-finite gauge is out of range. Ids this
        catalogue does not define are never out of range (see ``is_known``).
        """
        ids = np.asarray(metric, dtype=np.int64)
        inside = (ids >= 0) & (ids <= self.max_id)
        safe = np.where(inside, ids, 0)
        gauge = self.is_float[safe]
        value = np.where(gauge, raw.view(np.float64), raw.astype(np.float64))
        low, high = self.valid_bounds[safe, 0], self.valid_bounds[safe, 1]
        with np.errstate(invalid="ignore"):
            ok = (value >= low) & (value <= high) & (~gauge | np.isfinite(value))
        return np.asarray(inside & self.is_known[safe] & ~ok)


CATALOGUE = Catalogue()
