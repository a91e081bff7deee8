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
        self._layout: _Layout | None = None
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
        lay = self._layout_of(frame)
        out = StepResult()
        n_ctr = len(lay.counters)
        rate = np.full(n_ctr + 1, np.nan)  # per counter sample, and NaN for the rest
        if self.last_ts_ns is not None and n_ctr:
            self._rates(frame, lay, (frame.ts_ns - self.last_ts_ns) / 1e9, rate, out)
        self._state_events(frame, lay, out)
        self._threshold_events(frame, lay, rate, out)
        self._anomalies_and_learn(frame, lay, rate[:n_ctr], out)
        if not emit:
            out.events.clear()
        self.last_raw[lay.slots] = frame.raw
        if not lay.warm:
            self.have[lay.slots] = True
            lay.warm = True
        self.last_ts_ns = frame.ts_ns
        return out

    def _rates(self, frame: Frame, lay: _Layout, dt_s: float, rate: NDArray[np.float64],
               out: StepResult) -> None:
        """Fill ``rate`` (per counter sample of ``lay``) where the counter had a value."""
        if dt_s <= 0:
            return
        pos = None if lay.warm else np.flatnonzero(self.have[lay.counter_slots])
        ctr = lay.counters if pos is None else lay.counters[pos]
        prev = self.last_raw[lay.counter_slots if pos is None else lay.counter_slots[pos]]
        stepped = counter_rates(prev, frame.raw[ctr], dt_s)
        if pos is None:
            rate[:-1] = stepped.rate
        else:
            rate[pos] = stepped.rate
        out.reset = stepped.reset
        if stepped.reset or not stepped.backwards.any():
            out.rates = 0 if stepped.reset else len(ctr)
            return
        went_back = np.flatnonzero(stepped.backwards)
        out.rates = len(ctr) - len(went_back)
        for i in ctr[went_back].tolist():
            out.backwards.append((frame.entities[frame.entity_idx[i]],
                                  CATALOGUE.by_id(int(frame.metric[i])).name))

    _ARRAYS = ("metric", "last_raw", "have", "active", "odd", "mean", "var", "count")
    STATE_MAGIC = b"FOSS"
    """What a checkpoint starts with (deflated): a u32 length and a JSON header of the
    series keys, the last time and each array's dtype and length, then the arrays'
    bytes in that order. Earlier versions saved ``.npz`` archives."""

    def snapshot(self) -> bytes:
        """The stream's whole state, to resume exactly where it stopped (see ``resume``),
        deflated (fast level: it is saved with every window, and names, flags and counts
        repeat, so it shrinks several-fold)."""
        arrays = [getattr(self, k) for k in self._ARRAYS]
        head = json.dumps({
            "keys": self._keys,
            "last_ts_ns": -1 if self.last_ts_ns is None else self.last_ts_ns,
            "arrays": [[a.dtype.str, len(a)] for a in arrays]}).encode()
        return zlib.compress(b"".join((self.STATE_MAGIC, len(head).to_bytes(4, "little"),
                                       head, *(a.tobytes() for a in arrays))), 1)

    @classmethod
    def resume(cls, device: str, source: str, rules: EventRules, state: bytes) -> SeriesStream:
        """A stream in the state ``snapshot`` saved, or an earlier version's ``.npz``
        archive (deflated, or bare)."""
        stream = cls(device, source, rules)
        body = state if state[:2] == b"PK" else zlib.decompress(state)
        if not body.startswith(cls.STATE_MAGIC):
            return cls._resume_npz(stream, body)
        at = len(cls.STATE_MAGIC) + 4
        head = json.loads(body[at:at + int.from_bytes(body[at - 4:at], "little")])
        at += int.from_bytes(body[at - 4:at], "little")
        stream._keys = [(e, int(m)) for e, m in head["keys"]]
        stream._slot = {k: i for i, k in enumerate(stream._keys)}
        last = int(head["last_ts_ns"])
        stream.last_ts_ns = None if last < 0 else last
        for name, (dtype, n) in zip(cls._ARRAYS, head["arrays"], strict=True):
            array = np.frombuffer(body, np.dtype(dtype), n, at).copy()
            at += array.nbytes
            setattr(stream, name, array)
        return stream

    @classmethod
    def _resume_npz(cls, stream: SeriesStream, archive: bytes) -> SeriesStream:
        with np.load(io.BytesIO(archive), allow_pickle=False) as saved:
            stream._keys = [(e, int(m)) for e, m in json.loads(str(saved["keys"]))]
            stream._slot = {k: i for i, k in enumerate(stream._keys)}
            last = int(saved["last_ts_ns"])
            stream.last_ts_ns = None if last < 0 else last
            for name in cls._ARRAYS:
                setattr(stream, name, saved[name].copy())
        return stream

    def _layout_of(self, frame: Frame) -> _Layout:
        lay = self._layout
        if lay is not None and frame.entity_idx is lay.arrays[0] \
                and frame.metric is lay.arrays[1] and frame.entities is lay.key[0]:
            return lay  # the very columns of the last frame (a decoder shares them)
        key = (frame.entities, frame.entity_idx.tobytes(), frame.metric.tobytes())
        if lay is not None and key == lay.key:
            lay.arrays = (frame.entity_idx, frame.metric)
            return lay
        slots = np.empty(len(frame.raw), dtype=np.int64)
        for i, (e, m) in enumerate(zip(frame.entity_idx.tolist(), frame.metric.tolist(),
                                       strict=True)):
            k = (frame.entities[e], m)
            slot = self._slot.get(k)
            if slot is None:
                slot = self._slot[k] = len(self._keys)
                self._keys.append(k)
            slots[i] = slot
        self._grow(len(self._keys))
        self.metric[slots] = frame.metric
        self._layout = _Layout.of(key, slots, frame, self.rules)
        return self._layout

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

    def _state_events(self, frame: Frame, lay: _Layout, out: StepResult) -> None:
        if not len(lay.states):
            return
        old = self.last_raw[lay.state_slots]
        changed = frame.raw[lay.states] != old
        if not lay.warm:
            changed &= self.have[lay.state_slots]
        for j in np.flatnonzero(changed).tolist():
            i = int(lay.states[j])
            new = int(frame.raw[i])
            sev = Severity.CRITICAL if new == _OPER_DOWN else Severity.INFO
            out.events.append(self._event(frame, i, EventKind.STATE_CHANGE, float(new),
                                          sev, f"{int(old[j])} -> {new}"))

    def _threshold_events(self, frame: Frame, lay: _Layout, rate: NDArray[np.float64],
                          out: StepResult) -> None:
        """``rate`` per counter sample, then NaN (the value of a ruled state)."""
        r = lay.ruled
        if not len(r):
            return
        value = np.where(lay.ruled_gauge, frame.raw[r].view(np.float64), rate[lay.ruled_rate])
        with np.errstate(invalid="ignore"):
            now = np.where(lay.below, value < lay.limit, value > lay.limit)
        was = self.active[lay.ruled_slots]
        if not (now != was).any():
            return  # no condition starts or ends
        known = ~np.isnan(value)
        for j in np.flatnonzero(now & ~was).tolist():
            mid = int(frame.metric[r[j]])
            rule = "below" if self.rules.below[mid] else "above"
            out.events.append(self._event(
                frame, int(r[j]), EventKind.THRESHOLD, float(value[j]),
                self.rules.severity[mid], f"{rule} {self.rules.limit[mid]:g}"))
        for j in np.flatnonzero(~now & was & known).tolist():
            out.events.append(self._event(frame, int(r[j]), EventKind.CLEARED,
                                          float(value[j]), Severity.INFO, "threshold cleared"))
        self.active[lay.ruled_slots] = np.where(known, now, was)

    def _anomalies_and_learn(self, frame: Frame, lay: _Layout, rate: NDArray[np.float64],
                             out: StepResult) -> None:
        """Judge the watched rates against their EWMA, then update the EWMA mean and
        variance of each watched counter with its rate unless that rate is anomalous
        (only watched counters are judged, so only they are learnt)."""
        w = lay.watch
        if not len(w):
            return
        cfg = self.rules.config
        s = lay.watch_slots
        r = rate[w]
        mean, var, count, was = self.mean[s], self.var[s], self.count[s], self.odd[s]
        known = ~np.isnan(r)
        diff = r - mean
        dev = np.abs(diff)
        odd = (known & (count >= cfg.anomaly_warmup) & (dev > cfg.anomaly_z * np.sqrt(var))
               & (dev > cfg.anomaly_min_relative * np.abs(mean)))
        if (known & (odd != was)).any():
            for j in np.flatnonzero(odd & ~was).tolist():
                out.events.append(self._event(
                    frame, int(lay.counters[w[j]]), EventKind.ANOMALY, float(r[j]),
                    Severity.WARNING, f"rate {r[j]:.4g}/s vs mean {mean[j]:.4g}/s"))
            for j in np.flatnonzero(~odd & was & known).tolist():
                out.events.append(self._event(frame, int(lay.counters[w[j]]),
                                              EventKind.CLEARED, float(r[j]), Severity.INFO,
                                              "anomaly cleared"))
            was = np.where(known, odd, was)
            self.odd[s] = was
        learn = known & ~was
        first = count == 0
        a = cfg.anomaly_alpha
        self.mean[s] = np.where(learn, np.where(first, r, mean + a * diff), mean)
        self.var[s] = np.where(learn, np.where(first, 0.0, (1 - a) * (var + a * diff * diff)),
                               var)
        self.count[s] = count + learn


@dataclass
class _Layout:
    """What a stream works out once per frame layout: each sample's slot; which
    samples are counters (only they have rates), states, under a threshold rule
    (with where their value comes from) or watched for anomalies; and the slots
    of each. ``warm``: every slot has had a value."""

    key: tuple[tuple[str, ...], bytes, bytes]
    arrays: tuple[NDArray[np.uint32], NDArray[np.uint16]]  # the last frame's columns
    slots: NDArray[np.int64]
    counters: NDArray[np.intp]
    counter_slots: NDArray[np.int64]
    watch: NDArray[np.intp]  # the counter samples watched for anomalies (positions)
    watch_slots: NDArray[np.int64]
    states: NDArray[np.intp]
    state_slots: NDArray[np.int64]
    ruled: NDArray[np.intp]
    ruled_slots: NDArray[np.int64]
    ruled_gauge: NDArray[np.bool_]
    ruled_rate: NDArray[np.intp]  # position in the rates, or past them (NaN)
    limit: NDArray[np.float64]
    below: NDArray[np.bool_]
    warm: bool = False

    @classmethod
    def of(cls, key: tuple[tuple[str, ...], bytes, bytes], slots: NDArray[np.int64],
           frame: Frame, rules: EventRules) -> _Layout:
        metric = frame.metric
        kind = _KIND[metric]
        counters, states = np.flatnonzero(kind == 0), np.flatnonzero(kind == 2)
        ruled = np.flatnonzero(~np.isnan(rules.limit[metric]))
        position = np.full(len(metric), len(counters), np.intp)
        position[counters] = np.arange(len(counters))
        watch = np.flatnonzero(rules.anomaly[metric[counters]])
        return cls(key, (frame.entity_idx, metric), slots, counters, slots[counters],
                   watch, slots[counters[watch]], states, slots[states], ruled,
                   slots[ruled], kind[ruled] == 1, position[ruled],
                   rules.limit[metric[ruled]], rules.below[metric[ruled]])
