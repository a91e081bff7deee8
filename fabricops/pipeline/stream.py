"""The series of one device from one source, followed frame by frame.

A ``SeriesStream`` maps each frame's samples onto its series, and its series
onto slots of a :class:`~fabricops.pipeline.stream_bank.StreamBank` (a frame
with the same layout as the last one reuses the mapping); the bank turns
counters into rates (:mod:`fabricops.pipeline.rates`) and extracts key events
(:mod:`fabricops.pipeline.events`), for many streams' frames at once. Frames
must come in time order; the caller drops a frame not newer than
``last_ts_ns`` (a re-delivery).
"""

from __future__ import annotations

import io
import itertools
import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE, MetricKind
from fabricops.core.frame import Frame
from fabricops.pipeline.events import EventRules
from fabricops.pipeline.stream_bank import COLUMNS, PACKED, StepResult, StreamBank

_KIND = np.zeros(CATALOGUE.max_id + 1, dtype=np.uint8)  # 0 counter, 1 gauge, 2 state
for _m in CATALOGUE.metrics:
    _KIND[_m.id] = {MetricKind.COUNTER: 0, MetricKind.GAUGE: 1, MetricKind.STATE: 2}[_m.kind]

__all__ = ["SeriesStream", "StepResult"]


class SeriesStream:
    """Rates and events of one (device, source); its series grow as new ones appear.
    Streams that share a ``bank`` can be stepped together (``StreamBank.step``); one
    without is given a bank of its own."""

    def __init__(self, device: str, source: str, rules: EventRules,
                 bank: StreamBank | None = None) -> None:
        self.device = device
        self.source = source
        self.rules = rules
        self.bank = bank if bank is not None else StreamBank(rules)
        self.last_ts_ns: int | None = None
        self._keys: list[tuple[str, int]] = []
        self._slot: dict[tuple[str, int], int] = {}
        self.gslot = np.zeros(0, np.int64)  # the bank's slot of each series
        self._layout: _Layout | None = None

    def step(self, frame: Frame, *, emit: bool = True) -> StepResult:
        """Advance by ``frame`` (known metrics only); ``emit`` False only warms state up."""
        out = self.bank.step([(self, frame)])[0]
        if not emit:
            out.events.clear()
        return out

    def column(self, name: str) -> NDArray[Any]:
        """This stream's values of the bank array ``name`` (one of ``COLUMNS``), in its
        series' order (a copy: the bank is written through ``StreamBank``)."""
        values: NDArray[Any] = getattr(self.bank, name)[self.gslot]
        return values

    _ARRAYS = tuple(name for name, _ in COLUMNS)
    STATE_MAGIC = b"FOSS"
    """What a checkpoint starts with (deflated): a u32 length and a JSON header of the
    series keys, the last time and each array's dtype and length, then the arrays'
    bytes in that order. Earlier versions saved ``.npz`` archives."""

    def snapshot(self) -> bytes:
        """The stream's whole state, to resume exactly where it stopped (see ``resume``),
        deflated (fast level: it is saved with every window, and names, flags and counts
        repeat, so it shrinks several-fold)."""
        arrays = [self.column(k) for k in self._ARRAYS]
        head = json.dumps({
            "keys": self._keys,
            "last_ts_ns": -1 if self.last_ts_ns is None else self.last_ts_ns,
            "arrays": [[a.dtype.str, len(a)] for a in arrays]}).encode()
        return zlib.compress(b"".join((self.STATE_MAGIC, len(head).to_bytes(4, "little"),
                                       head, *(a.tobytes() for a in arrays))), 1)

    @classmethod
    def resume(cls, device: str, source: str, rules: EventRules, state: bytes,
               bank: StreamBank | None = None) -> SeriesStream:
        """A stream in the state ``snapshot`` saved, or an earlier version's ``.npz``
        archive (deflated, or bare), with its series in new slots of ``bank``."""
        stream = cls(device, source, rules, bank)
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
        arrays = []
        for dtype, n in head["arrays"]:
            arrays.append(np.frombuffer(body, np.dtype(dtype), n, at))
            at += arrays[-1].nbytes
        return stream._settle(arrays)

    @classmethod
    def _resume_npz(cls, stream: SeriesStream, archive: bytes) -> SeriesStream:
        with np.load(io.BytesIO(archive), allow_pickle=False) as saved:
            stream._keys = [(e, int(m)) for e, m in json.loads(str(saved["keys"]))]
            stream._slot = {k: i for i, k in enumerate(stream._keys)}
            last = int(saved["last_ts_ns"])
            stream.last_ts_ns = None if last < 0 else last
            return stream._settle([saved.get(name) for name in cls._ARRAYS])

    def _settle(self, arrays: Sequence[NDArray[Any] | None]) -> SeriesStream:
        """Put a checkpoint's arrays (in ``_ARRAYS`` order) in new slots of the bank; one
        written before ``last_ts`` has each series' last value at the stream's last time."""
        n = len(self._keys)
        since = np.full(n, self.last_ts_ns or 0, np.int64)  # for ``last_ts``, if missing
        self.gslot = self.bank.alloc(n)
        for name, array in itertools.zip_longest(self._ARRAYS, arrays):
            getattr(self.bank, name)[self.gslot] = (since if array is None else array)[:n]
        return self

    def layout_of(self, frame: Frame) -> _Layout:
        """Where ``frame``'s samples go (slots of the bank) and how each is judged."""
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
        if len(self._keys) > len(self.gslot):
            self.gslot = np.concatenate([self.gslot,
                                         self.bank.alloc(len(self._keys) - len(self.gslot))])
        gslots = self.gslot[slots]
        self.bank.metric[gslots] = frame.metric
        self._layout = _Layout.of(key, gslots, frame, self.rules)
        return self._layout


@dataclass
class _Layout:
    """What a stream works out once per frame layout: each sample's slot; which
    samples are counters (only they have rates), states, under a threshold rule
    (with where their value comes from) or watched for anomalies; and the slots
    of each.

    All of it is one int64 array, ``packed``, laid out as ``stream_bank.PACKED``:
    its fields in that order, each as long as ``counts`` says (samples, counters,
    states, ruled samples, watched counters); flags are 0/1 and limits float64
    bits. A bank joins the layouts of many frames with one concatenation."""

    key: tuple[tuple[str, ...], bytes, bytes]
    arrays: tuple[NDArray[np.uint32], NDArray[np.uint16]]  # the last frame's columns
    packed: NDArray[np.int64]
    counts: tuple[int, int, int, int, int]

    @classmethod
    def of(cls, key: tuple[tuple[str, ...], bytes, bytes], slots: NDArray[np.int64],
           frame: Frame, rules: EventRules) -> _Layout:
        metric = frame.metric
        kind = _KIND[metric]
        counters, states = np.flatnonzero(kind == 0), np.flatnonzero(kind == 2)
        ruled = np.flatnonzero(~np.isnan(rules.limit[metric]))
        position = np.full(len(metric), -1, np.int64)  # among the counters
        position[counters] = np.arange(len(counters))
        watch = np.flatnonzero(rules.anomaly[metric[counters]])
        fields = {
            "slots": slots, "counters": counters, "counter_slots": slots[counters],
            "states": states, "state_slots": slots[states], "ruled": ruled,
            "ruled_slots": slots[ruled], "ruled_rate": position[ruled],
            "ruled_gauge": kind[ruled] == 1, "below": rules.below[metric[ruled]],
            "limit": rules.limit[metric[ruled]].view(np.int64), "watch": watch,
            "watch_slots": slots[counters[watch]]}
        packed = np.concatenate([fields[name].astype(np.int64, copy=False)
                                 for name, _ in PACKED])
        packed.flags.writeable = False
        counts = (len(slots), len(counters), len(states), len(ruled), len(watch))
        return cls(key, (frame.entity_idx, metric), packed, counts)
