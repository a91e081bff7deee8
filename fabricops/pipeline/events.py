"""Key events: which state changes, threshold crossings and anomalies become events.

``EventConfig`` holds the rules by catalogue metric name; ``EventRules``
compiles them into arrays indexed by metric id, so a stream of series can test
a whole frame at once. Thresholds apply to rates (per second) of counters and
to values of gauges. A crossing raises one event when the series enters the
condition and one ``cleared`` event when it leaves it; an anomaly is a rate far
from the series' exponentially weighted mean (in standard deviations, after a
warm-up), with the same enter/clear pairing.

Thresholds are per second, so a limit means the same at any sampling interval
(a 100 ms sample holding 300 pause frames is 3,000 frames/s). The anomaly
mean, its weight and its warm-up count samples: a series sampled at 100 ms
warms up and forgets ten times faster, in time, than at 1 s.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.core.catalogue import CATALOGUE, Catalogue, UnknownMetricError
from fabricops.core.records import Severity


class ThresholdRule(BaseModel):
    """A limit on one metric: the rate of a counter, the value of a gauge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str
    limit: float
    direction: Literal["above", "below"] = "above"
    severity: Severity = Severity.WARNING


DEFAULT_THRESHOLDS: tuple[ThresholdRule, ...] = (
    ThresholdRule(metric="in_fcs_errors", limit=0.0),
    ThresholdRule(metric="in_errors", limit=0.0),
    ThresholdRule(metric="in_discards", limit=0.0),
    ThresholdRule(metric="out_discards", limit=0.0),
    ThresholdRule(metric="carrier_transitions", limit=0.0, severity=Severity.CRITICAL),
    ThresholdRule(metric="rdma_retransmits", limit=0.0),
    ThresholdRule(metric="out_of_sequence", limit=0.0),
    ThresholdRule(metric="pfc_rx_pause{prio=3}", limit=1000.0),
    ThresholdRule(metric="pfc_tx_pause{prio=3}", limit=1000.0),
    ThresholdRule(metric="temperature_c", limit=75.0),
    ThresholdRule(metric="rx_power_dbm", limit=-12.0, direction="below"),
)
DEFAULT_ANOMALY_METRICS = ("in_octets", "out_octets", "ecn_marked_pkts", "cnp_sent")


class EventConfig(BaseModel):
    """Which changes are key events (defaults suit a RoCE fabric at 0.1-10 s sampling)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thresholds: tuple[ThresholdRule, ...] = DEFAULT_THRESHOLDS
    anomaly_metrics: tuple[str, ...] = DEFAULT_ANOMALY_METRICS
    anomaly_z: float = Field(default=8.0, gt=0, description="Deviation in standard deviations")
    anomaly_min_relative: float = Field(default=0.5, ge=0,
                                        description="And at least this fraction of the mean")
    anomaly_alpha: float = Field(default=0.05, gt=0, lt=1, description="EWMA weight")
    anomaly_warmup: int = Field(default=30, ge=2, description="Samples before judging")

    @model_validator(mode="after")
    def _metrics_exist(self) -> EventConfig:
        names = [r.metric for r in self.thresholds] + list(self.anomaly_metrics)
        for name in names:
            try:
                CATALOGUE.by_name(name)
            except UnknownMetricError as exc:
                raise ValueError(f"event rule on unknown metric {name!r}: {exc}") from exc
        return self


class EventRules:
    """``EventConfig`` as arrays indexed by metric id (NaN limit: no rule)."""

    def __init__(self, config: EventConfig, catalogue: Catalogue = CATALOGUE) -> None:
        size = catalogue.max_id + 1
        self.config = config
        self.limit = np.full(size, np.nan)
        self.below = np.zeros(size, dtype=bool)
        self.severity: list[Severity] = [Severity.WARNING] * size
        for rule in config.thresholds:
            mid = catalogue.id_of(rule.metric)
            self.limit[mid] = rule.limit
            self.below[mid] = rule.direction == "below"
            self.severity[mid] = rule.severity
        self.anomaly = np.zeros(size, dtype=bool)
        self.anomaly[[catalogue.id_of(n) for n in config.anomaly_metrics]] = True

    def breached(self, metric: NDArray[np.uint16], value: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Per series: is ``value`` (rate or gauge) past its metric's limit? NaN never is."""
        limit = self.limit[metric]
        with np.errstate(invalid="ignore"):
            return np.where(self.below[metric], value < limit, value > limit)
