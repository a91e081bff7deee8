"""The state of many series streams in shared arrays, stepped together.

A ``StreamBank`` holds one slot for every series of every stream it serves:
the series' metric, last raw value, whether it had one, whether it is inside
a threshold condition or an anomaly, its rate's EWMA (mean, variance, samples
learnt), and the time of its last value. A counter's rate is over the time
since its own last value: a stream's frames need not all hold the same series
(a device's state changes sent on their own between its samples). A stream
(:class:`~fabricops.pipeline.stream.SeriesStream`) maps its series to slots.

``step`` advances frames of distinct streams at once: counter rates
(:func:`~fabricops.pipeline.rates.frame_rates`), state
changes, thresholds and anomalies over all their samples in one pass of
array operations. A small device's frame costs about as much as a big one's
when each frame is a pass of its own (the pass is a hundred or so array
calls); stepped together, frames cost by their samples. What each frame
gives (its events, in the order one pass a frame gives them, the counters
that went backwards, a reset) is what it would give stepped alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame
from fabricops.core.records import Event, EventKind, Severity
from fabricops.pipeline.events import EventRules
from fabricops.pipeline.rates import frame_rates

if TYPE_CHECKING:
    from fabricops.pipeline.stream import SeriesStream, _Layout

_OPER_DOWN = 2
_GROW_MIN = 1024


@dataclass
class StepResult:
    """What one frame did: events raised, counters that went backwards, a reset."""

    events: list[Event] = field(default_factory=list)
    backwards: list[tuple[str, str]] = field(default_factory=list)  # (entity, metric)
    reset: bool = False


COLUMNS: tuple[tuple[str, type], ...] = (
    ("metric", np.uint16), ("last_raw", np.uint64), ("have", np.bool_),
    ("active", np.bool_), ("odd", np.bool_), ("mean", np.float64), ("var", np.float64),
    ("count", np.int64), ("last_ts", np.int64))
"""A slot's state: the arrays of a bank, and of a stream's checkpoint, in this order
(checkpoints written before ``last_ts`` lack it)."""

PACKED: tuple[tuple[str, int], ...] = (
    ("slots", 0), ("counters", 1), ("counter_slots", 1), ("states", 2), ("state_slots", 2),
    ("ruled", 3), ("ruled_slots", 3), ("ruled_rate", 3), ("ruled_gauge", 3), ("below", 3),
    ("limit", 3), ("watch", 4), ("watch_slots", 4))
"""A layout's ``packed`` fields in order, each with the index in its ``counts`` of its
length: samples, counters, states, ruled samples, watched counters."""
_FIELDS: dict[str, tuple[int, int]] = {  # field -> (its count, its rank among that count's)
    name: (group, [g for _, g in PACKED[:i]].count(group))
    for i, (name, group) in enumerate(PACKED)}
_WIDTH = np.bincount([g for _, g in PACKED], minlength=5).astype(np.int64)


class StreamBank:
    """Slots of many streams' series (see the module docstring). Slots are never
    given back one by one: ``clear`` forgets every stream at once."""

    def __init__(self, rules: EventRules) -> None:
        self.rules = rules
        self.clear()

    def clear(self) -> None:
        """Forget every slot (the streams that hold them are dropped too)."""
        self.size = 0
        self.metric = np.zeros(0, np.uint16)
        self.last_raw = np.zeros(0, np.uint64)
        self.have = np.zeros(0, bool)
        self.active = np.zeros(0, bool)
        self.odd = np.zeros(0, bool)
        self.mean = np.zeros(0)
        self.var = np.zeros(0)
        self.count = np.zeros(0, np.int64)
        self.last_ts = np.zeros(0, np.int64)

    def alloc(self, n: int) -> NDArray[np.int64]:
        """``n`` new slots, zeroed."""
        need = self.size + n
        if need > len(self.last_raw):
            cap = max(need, 2 * len(self.last_raw), _GROW_MIN)
            for name, dtype in COLUMNS:
                grown: NDArray[Any] = np.zeros(cap, dtype)
                grown[:self.size] = getattr(self, name)[:self.size]
                setattr(self, name, grown)
        slots = np.arange(self.size, need, dtype=np.int64)
        self.size = need
        return slots

    def step(self, items: Sequence[tuple[SeriesStream, Frame]]) -> list[StepResult]:
        """Advance each stream by its frame: streams distinct, each frame newer than its
        stream's ``last_ts_ns`` or at it (a part of that instant: its series' rates are
        over the time since their own last values). One result a frame, in order."""
        if not items:
            return []
        lays = [stream.layout_of(frame) for stream, frame in items]
        step = _Pass(self, items, lays)
        out = [StepResult() for _ in items]
        found: list[tuple[int, Event]] = []
        step.rates(out)
        step.state_events(found)
        step.threshold_events(found)
        step.anomalies_and_learn(found)
        for f, event in found:  # a frame's events by kind, each kind by sample
            out[f].events.append(event)
        self.last_raw[step.slots] = step.raw
        self.have[step.slots] = True
        self.last_ts[step.slots] = np.repeat(step.ts, step.counts[:, 0])
        for stream, frame in items:
            stream.last_ts_ns = frame.ts_ns
        return out


def _cat(parts: list[NDArray[Any]]) -> NDArray[Any]:
    """``parts`` end to end (never empty: a pass has a frame); one part as it is."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


class _Pass:
    """One ``StreamBank.step``: the frames' samples and their layouts' index arrays
    laid end to end (positions in the joined samples, slots in the bank). The layouts'
    ``packed`` arrays are joined once; a field of every layout is then one gather."""

    def __init__(self, bank: StreamBank, items: Sequence[tuple[SeriesStream, Frame]],
                 lays: list[_Layout]) -> None:
        self.bank, self.items, self.rules = bank, items, bank.rules
        n = len(items)
        self.raw = _cat([f.raw for _, f in items])
        self.packed = _cat([lay.packed for lay in lays])
        self.counts = np.array([lay.counts for lay in lays], np.int64).reshape(n, 5)
        sizes = self.counts @ _WIDTH
        self.at = np.cumsum(sizes) - sizes  # where each layout's packed fields begin
        self._gathers: dict[int, tuple[NDArray[np.int64], NDArray[np.int64]]] = {}
        self.off = np.zeros(n + 1, np.int64)  # where each frame's samples start
        np.cumsum(self.counts[:, 0], out=self.off[1:])
        self.slots = self._field("slots")
        # counters: position in the joined samples, slot, frame, where each frame's start
        self.nc, self.cpos, self.cslots = self._joined("counters", "counter_slots", self.off)
        self.cframe = np.repeat(np.arange(n), self.nc)
        self.cstart = np.cumsum(self.nc) - self.nc
        self.ts = np.array([f.ts_ns for _, f in items], np.int64)
        self.rate = np.full(len(self.cpos) + 1, np.nan)  # per counter, then NaN (no rate)

    def _field(self, name: str) -> NDArray[np.int64]:
        """The layouts' packed field ``name`` (see ``PACKED``), laid end to end."""
        group, rank = _FIELDS[name]
        gather = self._gathers.get(group)
        if gather is None:
            c = self.counts[:, group]
            start = self.at + self.counts[:, :group] @ _WIDTH[:group]
            base = np.repeat(start - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))
            gather = self._gathers[group] = (base, np.repeat(c, c))
        base, length = gather
        return self.packed[base + rank * length if rank else base]

    def _joined(self, index: str, slots: str, start: NDArray[np.int64]
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
        """Of the layouts' fields ``index`` (positions in a frame's samples, or in its
        counters) and ``slots`` (theirs in the bank): each frame's count, the positions
        moved by ``start`` (where each frame's part begins) and the slots, laid end to
        end."""
        counts = self.counts[:, _FIELDS[index][0]]
        pos = self._field(index) + np.repeat(start[:len(counts)], counts)
        return counts, pos, self._field(slots)

    def _names(self, pos: int) -> tuple[int, Frame, int]:
        """The frame (its number, and itself) of a joined sample position, and the
        sample's index in it."""
        f = int(np.searchsorted(self.off, pos, side="right")) - 1
        return f, self.items[f][1], pos - int(self.off[f])

    def _event(self, pos: int, kind: EventKind, value: float, severity: Severity,
               detail: str) -> tuple[int, Event]:
        """The event of the sample at joined position ``pos``, with its frame's number."""
        f, frame, i = self._names(pos)
        return f, Event(ts_ns=frame.ts_ns, device=self.items[f][0].device,
                        entity=frame.entities[frame.entity_idx[i]],
                        metric=CATALOGUE.by_id(int(frame.metric[i])).name, kind=kind,
                        value=value, severity=severity, detail=detail)

    def rates(self, out: list[StepResult]) -> None:
        """Each counter's rate where it had an earlier value: over the time since it."""
        bank, slots = self.bank, self.cslots
        if not len(slots):
            return
        since = self.ts[self.cframe] - bank.last_ts[slots]  # since the counter's last value
        known = bank.have[slots] & (since > 0)
        dt = np.where(known, since, 1) / 1e9
        step = frame_rates(bank.last_raw[slots], self.raw[self.cpos], dt, self.cframe,
                           len(self.items), known)
        self.rate[:-1] = step.rate
        for f in np.flatnonzero(step.reset).tolist():
            out[f].reset = True
        for j in np.flatnonzero(step.backwards).tolist():
            f, frame, i = self._names(int(self.cpos[j]))
            out[f].backwards.append((frame.entities[frame.entity_idx[i]],
                                     CATALOGUE.by_id(int(frame.metric[i])).name))

    def state_events(self, found: list[tuple[int, Event]]) -> None:
        ns, pos, slots = self._joined("states", "state_slots", self.off)
        if not ns.any():
            return
        old, new = self.bank.last_raw[slots], self.raw[pos]
        changed = (new != old) & self.bank.have[slots]
        for j in np.flatnonzero(changed).tolist():
            value = int(new[j])
            sev = Severity.CRITICAL if value == _OPER_DOWN else Severity.INFO
            found.append(self._event(int(pos[j]), EventKind.STATE_CHANGE, float(value), sev,
                                     f"{int(old[j])} -> {value}"))

    def threshold_events(self, found: list[tuple[int, Event]]) -> None:
        """Samples under a threshold rule: a gauge's value, or a counter's rate (a
        state's is NaN, as is a rate not known)."""
        bank = self.bank
        nr, pos, slots = self._joined("ruled", "ruled_slots", self.off)
        if not nr.any():
            return
        gauge = self._field("ruled_gauge").astype(bool)
        rated = self._field("ruled_rate")
        at = np.where(rated >= 0, rated + np.repeat(self.cstart, nr), len(self.rate) - 1)
        value = np.where(gauge, self.raw[pos].view(np.float64), self.rate[at])
        limit = self._field("limit").view(np.float64)
        below = self._field("below").astype(bool)
        with np.errstate(invalid="ignore"):
            now = np.where(below, value < limit, value > limit)
        was = bank.active[slots]
        if not (now != was).any():
            return  # no condition starts or ends
        known = ~np.isnan(value)
        rules = self.rules
        for j in np.flatnonzero(now & ~was).tolist():
            mid = int(bank.metric[slots[j]])
            rule = "below" if rules.below[mid] else "above"
            found.append(self._event(int(pos[j]), EventKind.THRESHOLD, float(value[j]),
                                     rules.severity[mid], f"{rule} {rules.limit[mid]:g}"))
        for j in np.flatnonzero(~now & was & known).tolist():
            found.append(self._event(int(pos[j]), EventKind.CLEARED, float(value[j]),
                                     Severity.INFO, "threshold cleared"))
        bank.active[slots] = np.where(known, now, was)

    def anomalies_and_learn(self, found: list[tuple[int, Event]]) -> None:
        """Judge the watched rates against their EWMA, then update the EWMA mean and
        variance of each watched counter with its rate unless that rate is anomalous
        (only watched counters are judged, so only they are learnt)."""
        bank = self.bank
        nw, w, s = self._joined("watch", "watch_slots", self.cstart)
        if not nw.any():
            return
        cfg = self.rules.config
        r = self.rate[w]
        mean, var, count, was = bank.mean[s], bank.var[s], bank.count[s], bank.odd[s]
        known = ~np.isnan(r)
        diff = r - mean
        dev = np.abs(diff)
        odd = (known & (count >= cfg.anomaly_warmup) & (dev > cfg.anomaly_z * np.sqrt(var))
               & (dev > cfg.anomaly_min_relative * np.abs(mean)))
        if (known & (odd != was)).any():
            for j in np.flatnonzero(odd & ~was).tolist():
                found.append(self._event(int(self.cpos[w[j]]), EventKind.ANOMALY, float(r[j]),
                                         Severity.WARNING,
                                         f"rate {r[j]:.4g}/s vs mean {mean[j]:.4g}/s"))
            for j in np.flatnonzero(~odd & was & known).tolist():
                found.append(self._event(int(self.cpos[w[j]]), EventKind.CLEARED, float(r[j]),
                                         Severity.INFO, "anomaly cleared"))
            was = np.where(known, odd, was)
            bank.odd[s] = was
        learn = known & ~was
        first = count == 0
        a = cfg.anomaly_alpha
        bank.mean[s] = np.where(learn, np.where(first, r, mean + a * diff), mean)
        bank.var[s] = np.where(learn, np.where(first, 0.0, (1 - a) * (var + a * diff * diff)),
                               var)
        bank.count[s] = count + learn


class StepQueue:
    """Frames waiting to step their streams (all of one bank), stepped together by
    ``run``: the first frame queued for each stream, then the second, and so on."""

    def __init__(self, bank: StreamBank) -> None:
        self.bank = bank
        self._queued: dict[SeriesStream, list[tuple[int, Frame, bool]]] = {}
        self._n = 0

    def add(self, stream: SeriesStream, frame: Frame, emit: bool) -> None:
        """Queue ``frame`` (newer than ``last_ts_ns(stream)``, or at it: a part of that
        instant); ``emit`` False: its events are dropped (it only warms the stream up)."""
        self._queued.setdefault(stream, []).append((self._n, frame, emit))
        self._n += 1

    def last_ts_ns(self, stream: SeriesStream) -> int | None:
        """The stream's newest frame time, queued frames included."""
        queued = self._queued.get(stream)
        return queued[-1][1].ts_ns if queued else stream.last_ts_ns

    def run(self) -> list[tuple[SeriesStream, Frame, StepResult]]:
        """Step every queued frame; what each did, in the order they were queued."""
        done: list[tuple[int, SeriesStream, Frame, StepResult]] = []
        queued, self._queued, self._n = self._queued, {}, 0
        rounds: list[list[tuple[SeriesStream, tuple[int, Frame, bool]]]] = []
        for stream, frames in queued.items():
            for r, entry in enumerate(frames):
                if r == len(rounds):
                    rounds.append([])
                rounds[r].append((stream, entry))
        for items in rounds:
            for (stream, (n, frame, emit)), out in zip(
                    items, self.bank.step([(s, q[1]) for s, q in items]), strict=True):
                if not emit:
                    out.events.clear()
                done.append((n, stream, frame, out))
        done.sort(key=lambda d: d[0])
        return [(s, f, out) for _, s, f, out in done]

    def clear(self) -> None:
        """Forget what is queued (the batch failed)."""
        self._queued.clear()
        self._n = 0
