"""The frame layout of one shape of gNMI notification, checked once and reused.

A device streams the same notification again and again: the same leaves in the
same order, new values. ``NotificationMapper`` builds the first frame of a shape
with ``Frame.build`` (every check) and keeps a ``Layout`` of it; later frames of
that shape are made here with the same result at a fraction of the cost:

* values are packed in one ``struct`` call (``d`` for gauges, ``Q`` for the
  rest) when every value is a plain ``int`` or ``float`` and fits; anything
  else (a bool, a negative counter, a float where an integer belongs) goes
  through ``frame_codec.pack_values``, which packs it or raises the same
  ``FrameError`` as ``Frame.build``;
* the range check (``Catalogue.out_of_range``) is done on the values, only for
  the samples whose metric has a range narrower than what packing already
  guarantees (every gauge, states, bounded counters).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.core.frame_codec import pack_values

_PLAIN: Final = frozenset((int, float))
_U64_TOP: Final = float(2**64 - 1)  # every packed counter, as float64, is at most this


class Layout:
    """One notification shape's frame layout: its entity table, indices, metric ids,
    which samples are gauges, and the range checks its metrics need."""

    __slots__ = ("checks", "entities", "entity_idx", "gauge", "metric", "packer")

    def __init__(self, frame: Frame) -> None:
        """The layout of ``frame``, which ``Frame.build`` made (so its layout is checked)."""
        self.entities, self.entity_idx, self.metric = frame.entities, frame.entity_idx, \
            frame.metric
        ids = frame.metric.astype(np.int64)
        inside = ids <= CATALOGUE.max_id
        safe = np.where(inside, ids, 0)
        self.gauge: NDArray[np.bool_] = CATALOGUE.is_float[safe] & inside
        low, high = CATALOGUE.valid_bounds[safe, 0], CATALOGUE.valid_bounds[safe, 1]
        needed = inside & CATALOGUE.is_known[safe] & (
            self.gauge | (low > 0) | (high < _U64_TOP))
        self.checks: tuple[tuple[int, float, float, bool], ...] = tuple(
            (i, float(low[i]), float(high[i]), bool(self.gauge[i]))
            for i in np.flatnonzero(needed).tolist())
        self.packer = struct.Struct("<" + "".join(
            "d" if g else "Q" for g in self.gauge.tolist()))

    def frame(self, device: str, ts_ns: int, seq: int, values: Sequence[int | float]
              ) -> Frame:
        """The frame of ``values`` in this layout (values checked as ``Frame.build`` does;
        ``ts_ns`` and ``seq`` within what a frame takes)."""
        raw: NDArray[np.uint64] | None = None
        if set(map(type, values)) <= _PLAIN:
            try:
                raw = np.frombuffer(self.packer.pack(*values), np.uint64)
            except struct.error:  # a value a plain pack cannot take: pack_values says why
                raw = None
        if raw is None:
            raw = pack_values(values, self.gauge, f"frame of device {device!r}",
                              lambda i: CATALOGUE.by_id(int(self.metric[i])).name)
            raw.flags.writeable = False
        return Frame.trusted(device, ts_ns, Source.GNMI, seq, self.entities, self.entity_idx,
                             self.metric, raw)

    def out_of_range(self, values: Sequence[int | float]) -> list[int]:
        """The samples whose value ``Catalogue.out_of_range`` flags, given values that
        ``frame`` packed."""
        bad = []
        for i, low, high, gauge in self.checks:
            x = float(values[i])
            if not (low <= x <= high) or (gauge and not math.isfinite(x)):
                bad.append(i)
        return bad
