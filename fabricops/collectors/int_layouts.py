"""Hop metadata layouts: where each hop field sits in a metadata item, and a bounded cache.

A *layout* is what one instruction bitmap and one item size make of a metadata
item. Its key (``layout_key``) packs the 16-bit bitmap, the item size in bytes
(Hop ML x 4 for an INT-MD stack item, 0 for a report's own metadata) and
whether the item is a report's own metadata (RepMdBits: bit 0 reserved, no
checksum complement). Its value is one row of ``FIELDS``: the byte offset of
each hop field in the item, or -1 when the bitmap does not ask for it.

``compile_layouts(keys)`` computes rows for any number of keys at once from bit
tables (offset of a field = bytes of the bits set before it), so a new layout
costs no more than a known one to decode. ``LayoutCache`` keeps the rows of
the ``capacity`` most recently used layouts, recency counted per lookup call
(one call per parsed batch): memory stays bounded however many layouts
exporters send, and its hits, misses and evictions (per distinct layout of a
call) show how much the layouts churn.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fabricops.collectors.int_headers import _ITEM_BYTES, I64
from fabricops.core.intreport import Instruction

_I = Instruction
FIELDS: Final[tuple[tuple[str, int, int, int, bool], ...]] = (
    ("node_id", _I.NODE_ID, 0, 4, False),
    ("ingress_port", _I.L1_PORTS, 0, 2, False),
    ("egress_port", _I.L1_PORTS, 2, 2, False),
    ("hop_latency_ns", _I.HOP_LATENCY, 0, 4, False),
    ("queue_id", _I.QUEUE, 0, 1, False),
    ("queue_occupancy", _I.QUEUE, 0, 4, True),
    ("ingress_ts_ns", _I.INGRESS_TS, 0, 8, False),
    ("egress_ts_ns", _I.EGRESS_TS, 0, 8, False),
    ("l2_ingress_port", _I.L2_PORTS, 0, 4, False),
    ("l2_egress_port", _I.L2_PORTS, 4, 4, False),
    ("egress_tx_util", _I.TX_UTIL, 0, 4, False),
    ("buffer_id", _I.BUFFER, 0, 1, False),
    ("buffer_occupancy", _I.BUFFER, 0, 4, True),
    ("checksum_complement", _I.CHECKSUM_COMPLEMENT, 0, 4, False),
)
"""Per hop field: (column, instruction bit, byte offset in the bit's metadata, bytes,
low 24 bits only). The checksum complement sits in the item's last word."""
CHECKSUM_FIELD: Final = len(FIELDS) - 1
"""Index of the checksum complement in ``FIELDS`` (and in a layout's row)."""
_OWN_FLAG: Final = 1 << 24
DEFAULT_CAPACITY: Final = 4096


def layout_key(bits: I64, item_bytes: I64 | int, *, own: bool = False) -> I64:
    """Layout keys of instruction bitmaps and item sizes (``own``: report metadata)."""
    key: I64 = (np.asarray(bits, np.int64) & 0xFFFF) << 8 | (np.asarray(item_bytes, np.int64)
                                                            & 0xFF)
    return key | _OWN_FLAG if own else key


def compile_layouts(keys: I64) -> NDArray[np.int16]:
    """Per key, the byte offset of every field of ``FIELDS`` in its item (-1: absent)."""
    keys = np.asarray(keys, np.int64)
    bits, item_bytes = (keys >> 8) & 0xFFFF, keys & 0xFF
    own = (keys & _OWN_FLAG) != 0
    rows = np.full((len(keys), len(FIELDS)), -1, np.int16)
    for f, (_, bit, sub, _, _) in enumerate(FIELDS):
        asked = (bits & bit) != 0
        if bit == _I.CHECKSUM_COMPLEMENT:
            offset = item_bytes - 4
            asked &= ~own
        else:
            offset = _ITEM_BYTES[bits & (0xFFFF ^ (2 * bit - 1))] + sub
            if bit == _I.NODE_ID:
                asked &= ~own
        rows[:, f] = np.where(asked, offset, -1)
    return rows


@dataclass(frozen=True)
class LayoutLookups:
    """Distinct layouts one lookup call found (``hits``), computed (``misses``) and
    pushed out of the cache to make room (``evictions``)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0


class LayoutCache:
    """The rows of at most ``capacity`` layouts, least recently used evicted first.

    Thread-safe. Entries used by the current call are never evicted by it; when
    one call brings more new layouts than there is room, the surplus is computed
    and used but not kept.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"layout cache capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._keys = np.full(capacity, -1, np.int64)
        self._used = np.full(capacity, -1, np.int64)
        self._rows = np.full((capacity, len(FIELDS)), -1, np.int16)
        self._sorted_keys = self._keys.copy()
        self._sorted_slots = np.arange(capacity)
        self._tick = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(np.count_nonzero(self._keys >= 0))

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache's arrays (fixed by ``capacity``)."""
        return sum(a.nbytes for a in (self._keys, self._used, self._rows,
                                      self._sorted_keys, self._sorted_slots))

    def lookup(self, keys: I64) -> tuple[NDArray[np.int16], LayoutLookups]:
        """Rows of ``keys`` (one per key, in order), computing and keeping the missing ones."""
        unique, inverse = np.unique(np.asarray(keys, np.int64), return_inverse=True)
        with self._lock:
            rows, lookups = self._resolve(unique)
        return rows[inverse.reshape(-1)], lookups

    def _resolve(self, unique: I64) -> tuple[NDArray[np.int16], LayoutLookups]:
        self._tick += 1
        at = np.minimum(np.searchsorted(self._sorted_keys, unique), self.capacity - 1)
        found = self._sorted_keys[at] == unique
        slots = self._sorted_slots[at[found]]
        self._used[slots] = self._tick
        rows = np.empty((len(unique), len(FIELDS)), np.int16)
        rows[found] = self._rows[slots]
        missing = unique[~found]
        if len(missing) == 0:
            return rows, LayoutLookups(hits=len(slots))
        new_rows = compile_layouts(missing)
        rows[~found] = new_rows
        room = min(len(missing), self.capacity - len(slots))
        victims = np.argpartition(self._used, room - 1)[:room] if room else slots[:0]
        evicted = int(np.count_nonzero(self._keys[victims] >= 0))
        self._keys[victims], self._rows[victims] = missing[:room], new_rows[:room]
        self._used[victims] = self._tick
        order = np.argsort(self._keys, kind="stable")
        self._sorted_keys, self._sorted_slots = self._keys[order], order
        return rows, LayoutLookups(len(slots), len(missing), evicted)


__all__ = ["CHECKSUM_FIELD", "DEFAULT_CAPACITY", "FIELDS", "LayoutCache", "LayoutLookups",
           "compile_layouts", "layout_key"]
