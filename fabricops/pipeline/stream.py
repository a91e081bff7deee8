"""The series of one device from one source, followed frame by frame.

A ``SeriesStream`` maps each frame's samples onto its series slots (a frame
with the same layout as the last one reuses the mapping), turns counters into
rates (:mod:`fabricops.pipeline.rates`) and extracts key events
(:mod:`fabricops.pipeline.events`). Frames must come in time order; the
caller drops a frame not newer than ``last_ts_ns`` (a re-delivery).
"""

from __future__ import annotations

import io
import json
import zlib
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.core.frame import Frame
from fabricops.core.records import Event, EventKind, Severity
from fabricops.pipeline.events import EventRules
from fabricops.pipeline.rates import counter_rates

_KIND = np.zeros(CATALOGUE.max_id + 1, dtype=np.uint8)  # 0 counter, 1 gauge, 2 state
for _m in CATALOGUE.metrics:
    _KIND[_m.id] = {MetricKind.COUNTER: 0, MetricKind.GAUGE: 1, MetricKind.STATE: 2}[_m.kind]
_OPER_DOWN = 2


@dataclass
class StepResult:
    """What one frame did: events raised, counters that went backwards, a reset."""

    events: list[Event] = field(default_factory=list)
    backwards: list[tuple[str, str]] = field(default_factory=list)  # (entity, metric)
    reset: bool = False
    rates: int = 0


class SeriesStream:
    """Rates and events of one (device, source); state grows as new series appear."""

    def __init__(self, device: str, source: str, rules: EventRules) -> None:
        self.device = device
        self.source = source
        self.rules = rules
        self.last_ts_ns: int | None = None
        self._keys: list[tuple[str, int]] = []
        self._slot: dict[tuple[str, int], int] = {}
        self._layout: tuple[tuple[str, ...], bytes, bytes] | None = None
        self._frame_slots = np.zeros(0, dtype=np.int64)
        self.metric = np.zeros(0, dtype=np.uint16)
        self.last_raw = np.zeros(0, dtype=np.uint64)
        self.have = np.zeros(0, dtype=bool)
        self.active = np.zeros(0, dtype=bool)  # inside a threshold condition
        self.odd = np.zeros(0, dtype=bool)  # inside an anomaly
        self.mean = np.zeros(0)
        self.var = np.zeros(0)
        self.count = np.zeros(0, dtype=np.int64)

    def step(self, frame: Frame, *, emit: bool = True) -> StepResult:
        """Advance by ``frame`` (known metrics only); ``emit`` False only warms state up."""
        slots = self._slots_of(frame)
        raw = frame.raw
        kind = _KIND[frame.metric]
        out = StepResult()
        rate = np.full(len(raw), np.nan)
        had = self.have[slots]
        if self.last_ts_ns is not None:
            dt_s = (frame.ts_ns - self.last_ts_ns) / 1e9
            ctr = np.flatnonzero((kind == 0) & had)
            if ctr.size and dt_s > 0:
                stepped = counter_rates(self.last_raw[slots[ctr]], raw[ctr], dt_s)
                rate[ctr] = stepped.rate
                out.reset = stepped.reset
                out.rates = int(np.count_nonzero(~np.isnan(stepped.rate)))
                for i in ctr[stepped.backwards]:
                    out.backwards.append((frame.entities[frame.entity_idx[i]],
                                          CATALOGUE.by_id(int(frame.metric[i])).name))
        gauge = kind == 1
        value = np.where(gauge, raw.view(np.float64), rate)
        self._state_events(frame, slots, kind, had, out)
        self._threshold_events(frame, slots, value, out)
        self._anomaly_events(frame, slots, rate, out)
        if not emit:
            out.events.clear()
        self._learn(slots, rate)
        self.last_raw[slots] = raw
        self.have[slots] = True
        self.last_ts_ns = frame.ts_ns
        return out

    _ARRAYS = ("metric", "last_raw", "have", "active", "odd", "mean", "var", "count")

    def snapshot(self) -> bytes:
        """The stream's whole state, to resume exactly where it stopped (see ``resume``):
        an ``.npz`` archive, deflated (fast level: it is saved with every window, and
        names, flags and counts repeat, so it shrinks about tenfold)."""
        buf = io.BytesIO()
        names = np.array(json.dumps(self._keys))
        last = np.array(-1 if self.last_ts_ns is None else self.last_ts_ns, np.int64)
        np.savez(buf, keys=names, last_ts_ns=last,
                 **{k: getattr(self, k) for k in self._ARRAYS})
        return zlib.compress(buf.getbuffer(), 1)

    @classmethod
    def resume(cls, device: str, source: str, rules: EventRules, state: bytes) -> SeriesStream:
        """A stream in the state ``snapshot`` saved (deflated, or a bare ``.npz`` archive
        as earlier versions saved it)."""
        stream = cls(device, source, rules)
        archive = state if state[:2] == b"PK" else zlib.decompress(state)
        with np.load(io.BytesIO(archive), allow_pickle=False) as saved:
            stream._keys = [(e, int(m)) for e, m in json.loads(str(saved["keys"]))]
            stream._slot = {k: i for i, k in enumerate(stream._keys)}
            last = int(saved["last_ts_ns"])
            stream.last_ts_ns = None if last < 0 else last
            for name in cls._ARRAYS:
                setattr(stream, name, saved[name].copy())
        return stream

    def _slots_of(self, frame: Frame) -> NDArray[np.int64]:
        layout = (frame.entities, frame.entity_idx.tobytes(), frame.metric.tobytes())
        if layout == self._layout:
            return self._frame_slots
        slots = np.empty(len(frame.raw), dtype=np.int64)
        for i, (e, m) in enumerate(zip(frame.entity_idx.tolist(), frame.metric.tolist(),
                                       strict=True)):
            key = (frame.entities[e], m)
            slot = self._slot.get(key)
            if slot is None:
                slot = self._slot[key] = len(self._keys)
                self._keys.append(key)
            slots[i] = slot
        self._grow(len(self._keys))
        self.metric[slots] = frame.metric
        self._layout, self._frame_slots = layout, slots
        return slots

    def _grow(self, n: int) -> None:
        extra = n - len(self.last_raw)
        if extra <= 0:
            return
        self.metric = np.concatenate([self.metric, np.zeros(extra, np.uint16)])
        self.last_raw = np.concatenate([self.last_raw, np.zeros(extra, np.uint64)])
        self.count = np.concatenate([self.count, np.zeros(extra, np.int64)])
        self.have, self.active, self.odd = (np.concatenate([a, np.zeros(extra, bool)])
                                            for a in (self.have, self.active, self.odd))
        self.mean, self.var = (np.concatenate([a, np.zeros(extra)]) for a in (self.mean, self.var))

    def _event(self, frame: Frame, i: int, kind: EventKind, value: float,
               severity: Severity, detail: str) -> Event:
        return Event(ts_ns=frame.ts_ns, device=self.device,
                     entity=frame.entities[frame.entity_idx[i]],
                     metric=CATALOGUE.by_id(int(frame.metric[i])).name, kind=kind,
                     value=value, severity=severity, detail=detail)

    def _state_events(self, frame: Frame, slots: NDArray[np.int64], kind: NDArray[np.uint8],
                      had: NDArray[np.bool_], out: StepResult) -> None:
        changed = np.flatnonzero((kind == 2) & had & (frame.raw != self.last_raw[slots]))
        for i in changed:
            new, old = int(frame.raw[i]), int(self.last_raw[slots[i]])
            sev = Severity.CRITICAL if new == _OPER_DOWN else Severity.INFO
            out.events.append(self._event(frame, int(i), EventKind.STATE_CHANGE, float(new),
                                          sev, f"{old} -> {new}"))

    def _threshold_events(self, frame: Frame, slots: NDArray[np.int64],
                          value: NDArray[np.float64], out: StepResult) -> None:
        now = self.rules.breached(frame.metric, value)
        was = self.active[slots]
        known = ~np.isnan(value)
        for i in np.flatnonzero(now & ~was):
            mid = int(frame.metric[i])
            rule = "below" if self.rules.below[mid] else "above"
            out.events.append(self._event(
                frame, int(i), EventKind.THRESHOLD, float(value[i]), self.rules.severity[mid],
                f"{rule} {self.rules.limit[mid]:g}"))
        for i in np.flatnonzero(~now & was & known):
            out.events.append(self._event(frame, int(i), EventKind.CLEARED, float(value[i]),
                                          Severity.INFO, "threshold cleared"))
        self.active[slots] = np.where(known, now, was)

    def _anomaly_events(self, frame: Frame, slots: NDArray[np.int64],
                        rate: NDArray[np.float64], out: StepResult) -> None:
        cfg = self.rules.config
        watched = self.rules.anomaly[frame.metric] & ~np.isnan(rate)
        warm = watched & (self.count[slots] >= cfg.anomaly_warmup)
        mean, std = self.mean[slots], np.sqrt(self.var[slots])
        dev = np.abs(rate - mean)
        odd = warm & (dev > cfg.anomaly_z * std) & (dev > cfg.anomaly_min_relative * np.abs(mean))
        was = self.odd[slots]
        for i in np.flatnonzero(odd & ~was):
            out.events.append(self._event(
                frame, int(i), EventKind.ANOMALY, float(rate[i]), Severity.WARNING,
                f"rate {rate[i]:.4g}/s vs mean {mean[i]:.4g}/s"))
        for i in np.flatnonzero(~odd & was & watched):
            out.events.append(self._event(frame, int(i), EventKind.CLEARED, float(rate[i]),
                                          Severity.INFO, "anomaly cleared"))
        self.odd[slots] = np.where(watched, odd, was)

    def _learn(self, slots: NDArray[np.int64], rate: NDArray[np.float64]) -> None:
        """Update the EWMA mean and variance with the rates of non-anomalous samples."""
        ok = ~np.isnan(rate) & ~self.odd[slots]
        s, x = slots[ok], rate[ok]
        first = self.count[s] == 0
        a = self.rules.config.anomaly_alpha
        diff = x - self.mean[s]
        self.mean[s] = np.where(first, x, self.mean[s] + a * diff)
        self.var[s] = np.where(first, 0.0, (1 - a) * (self.var[s] + a * diff * diff))
        self.count[s] += 1
