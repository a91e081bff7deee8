"""The Store: telemetry tables in SQLite (embedded default) or PostgreSQL.

Every write is one transaction and idempotent: a row whose key is stored
already is left as it is (INT paths are merged, see ``put_int_paths``), so a
re-delivered bus message never duplicates anything. Writes return the rows
they inserted (or changed); every failure raises StoreError naming the
database (URL without password) and the cause, and is counted. Methods may
be called from several threads (one engine, a pool of connections).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Table, delete, func, select

from fabricops.core.records import Event, EventKind
from fabricops.store import bulk, queries
from fabricops.store.base import (
    ActionConflict,
    ActionNotFound,
    StoreConfig,
    StoreError,
)
from fabricops.store.bulk import insert_rows
from fabricops.store.models import (
    EVENTS,
    SEGMENTS,
    STREAM_STATES,
    EventRow,
    IntPathRow,
    SegmentRow,
    SeriesRow,
    StagedFrameRow,
)
from fabricops.store.operations import OperationsStore
from fabricops.store.records import (
    IntPathRecord,
    SegmentHead,
    SegmentMerge,
    SegmentRecord,
    SeriesRecord,
    WindowClose,
    merge_int_paths,
)

if TYPE_CHECKING:
    from fabricops.core.frame import Frame


_log = logging.getLogger(__name__)
PRUNE_PAUSE_S = 0.01
"""Pause between two batches of a prune, for writers waiting for the lock (SQLite)."""

SERIES_KEY = ("entity", "metric")
SEGMENT_KEY = ("device", "source", "t_start_ns", "first_seq")
EVENT_KEY = ("ts_ns", "entity", "metric", "kind")
INT_PATH_KEY = ("src_ip", "dst_ip", "sport", "dport", "proto", "path")
STAGED_KEY = ("device", "source", "ts_ns")
STREAM_KEY = ("device", "source")
_FIRST_NS = -(2**63)  # a close without a window drops every staged frame before its time


def _replace_build(excluded: Any, table: Table) -> tuple[dict[str, Any], Any]:
    cols = ("t_end_ns", "last_seq", "n_points", "n_series", "encoding", "max_error", "payload")
    return {c: excluded[c] for c in cols}, table.c.payload != excluded.payload


_REPLACE = bulk.Upsert(_replace_build)


class _Changed(Exception):  # noqa: N818  (rolls a merge back; never leaves the store)
    """The segments a merge read changed before it could replace them."""


def _merge_one(m: SegmentMerge, conn: Connection) -> int:
    """``Store.merge_segments`` of one merge; the segments deleted."""
    first, last = m.old[0], m.old[-1]
    gone = conn.execute(delete(SegmentRow).where(
        SegmentRow.device == first.device, SegmentRow.source == first.source,
        SegmentRow.t_start_ns >= first.t_start_ns, SegmentRow.t_start_ns <= last.t_start_ns)
        .returning(SegmentRow.t_start_ns, SegmentRow.first_seq, SegmentRow.n_points,
                   SegmentRow.t_end_ns, SegmentRow.last_seq)).all()
    if sorted(tuple(int(v) for v in r) for r in gone) != sorted(
            (s.t_start_ns, s.first_seq, s.n_points, s.t_end_ns, s.last_seq) for s in m.old):
        raise _Changed
    if insert_rows(conn, SEGMENTS, [queries.segment_row(m.new)], key=SEGMENT_KEY) != 1:
        raise _Changed
    return len(gone)


__all__ = ["ActionConflict", "ActionNotFound", "Store", "StoreConfig", "StoreError"]


class Store(OperationsStore):
    """Telemetry tables behind one engine; see the module docstring."""

    def put_series(self, records: Iterable[SeriesRecord]) -> int:
        """Record series not seen before (by entity and metric); returns how many."""
        rows = [{"device": r.device, "entity": r.entity, "metric": r.metric, "kind": r.kind}
                for r in records]
        return self._put("put_series", SeriesRow.__tablename__, rows, SERIES_KEY)

    def series(self, *, device: str | None = None,
               entity: str | None = None) -> list[SeriesRecord]:
        """Series of ``device`` and/or ``entity`` (all if None), by device, entity, metric."""
        rows = self._query("series", partial(queries.series, device=device, entity=entity))
        return [SeriesRecord(r.device, r.entity, r.metric, r.kind) for r in rows]

    def put_segments(self, records: Sequence[SegmentRecord]) -> int:
        """Store segments not stored yet (by device, source, t_start_ns, first_seq)."""
        rows = [queries.segment_row(r) for r in records]
        return self._put("put_segments", SegmentRow.__tablename__, rows, SEGMENT_KEY)

    def replace_segments(self, records: Sequence[SegmentRecord]) -> int:
        """Store segments, replacing the ones with the same key (retention rewrites
        old segments downsampled); returns rows inserted or changed."""
        rows = [queries.segment_row(r) for r in records]
        return self._put("replace_segments", SegmentRow.__tablename__, rows, SEGMENT_KEY,
                         upsert=_REPLACE)

    def segments(self, *, t0_ns: int, t1_ns: int, devices: Sequence[str] | None = None,
                 source: str | None = None) -> list[SegmentRecord]:
        """Segments overlapping [t0_ns, t1_ns], by device, source, t_start_ns, first_seq."""
        rows = self._query("segments", partial(queries.segments, t0_ns=t0_ns, t1_ns=t1_ns,
                                               devices=devices, source=source))
        return [queries.segment_record(r) for r in rows]

    def segments_starting(self, *, device: str, source: str, t0_ns: int,
                          t1_ns: int) -> list[SegmentRecord]:
        """The segments of (device, source) that start in [t0_ns, t1_ns), by t_start_ns
        and first_seq: what the store holds of one window, however long its history."""
        rows = self._query("segments", partial(queries.segments_starting, device=device,
                                               source=source, t0_ns=t0_ns, t1_ns=t1_ns))
        return [queries.segment_record(r) for r in rows]

    def streams_window_segments(self, streams: Sequence[tuple[str, str]], *, t0_ns: int,
                                t1_ns: int, reach_ns: int
                                ) -> dict[tuple[str, str], list[SegmentRecord]]:
        """Per (device, source) in ``streams``, its segments that hold samples in the
        window [t0_ns, t1_ns) and start at most ``reach_ns`` before it (the longest a
        segment can be), by t_start_ns and first_seq; a stream with none is left out.
        One statement for all: an index range of the streams' last ``reach_ns``."""
        stmt = select(SEGMENTS).where(
            SegmentRow.device.in_({d for d, _ in streams}),
            SegmentRow.source.in_({s for _, s in streams}),
            SegmentRow.t_start_ns >= t0_ns - reach_ns, SegmentRow.t_start_ns < t1_ns,
            SegmentRow.t_end_ns >= t0_ns).order_by(SegmentRow.t_start_ns, SegmentRow.first_seq)
        rows = self._read("window_segments", lambda conn: conn.execute(stmt).all())
        wanted = set(streams)
        out: dict[tuple[str, str], list[SegmentRecord]] = {}
        for r in rows:
            if (r.device, r.source) in wanted:
                out.setdefault((r.device, r.source), []).append(queries.segment_record(r))
        return out

    def segment_heads(self, *, device: str, source: str, t0_ns: int,
                      t1_ns: int) -> list[SegmentHead]:
        """The segments of (device, source) that start in [t0_ns, t1_ns), without their
        payloads, by t_start_ns and first_seq."""
        stmt = select(SegmentRow.device, SegmentRow.source, SegmentRow.t_start_ns,
                      SegmentRow.t_end_ns, SegmentRow.first_seq, SegmentRow.n_points,
                      SegmentRow.n_series).where(
            SegmentRow.device == device, SegmentRow.source == source,
            SegmentRow.t_start_ns >= t0_ns, SegmentRow.t_start_ns < t1_ns) \
            .order_by(SegmentRow.t_start_ns, SegmentRow.first_seq)
        rows = self._read("segment_heads", lambda conn: conn.execute(stmt).all())
        return [SegmentHead(*(r[0], r[1]), *(int(v) for v in r[2:])) for r in rows]

    def merge_segments(self, merges: Sequence[SegmentMerge]) -> list[bool]:
        """Per merge: delete the segments of its stream that start from its first old
        segment to its last and insert its new segment, if those were exactly its old
        ones, with the points they had, and its new segment's key is free; else leave
        them (a writer changed them after the merge read them). Deleting first makes the
        check see what it replaces (a window written again always has more points, see
        ``late.Held``): on SQLite the delete takes the write lock, on
        PostgreSQL it waits for a writer holding those rows (a segment another writer
        inserts meanwhile is left beside the merged one). All merges go in one
        transaction (a transaction per span writes three times as much); if one finds
        its segments changed, it is rolled back and each merge tried in a transaction of
        its own. Returns, per merge, whether it was done."""
        try:
            deleted = self._transaction("merge_segments", lambda conn: sum(
                _merge_one(m, conn) for m in merges))
            self._merged(len(merges), deleted)
            return [True] * len(merges)
        except _Changed:
            pass
        done = []
        for m in merges:
            try:
                deleted = self._transaction("merge_segments", partial(_merge_one, m))
            except _Changed:
                done.append(False)
                continue
            self._merged(1, deleted)
            done.append(True)
        return done

    def _merged(self, merges: int, deleted: int) -> None:
        self.metrics.rows_deleted.labels(SegmentRow.__tablename__).inc(deleted)
        self.metrics.written(SegmentRow.__tablename__, merges, merges)

    def segment_watermarks(self) -> dict[tuple[str, str], int]:
        """(device, source) -> the latest t_end_ns stored."""
        stmt = select(SegmentRow.device, SegmentRow.source, func.max(SegmentRow.t_end_ns)) \
            .group_by(SegmentRow.device, SegmentRow.source)
        rows = self._read("segment_watermarks", lambda conn: conn.execute(stmt).all())
        return {(device, source): int(t_end) for device, source, t_end in rows}

    def newest_ns(self) -> int:
        """The newest sample time kept: the latest segment end or staged frame (0: none)."""
        segments = select(func.max(SegmentRow.t_end_ns))
        staged = select(func.max(StagedFrameRow.ts_ns))
        found = self._read("newest_ns", lambda conn: (conn.execute(segments).scalar(),
                                                     conn.execute(staged).scalar()))
        return max((int(t) for t in found if t is not None), default=0)

    def put_events(self, events: Sequence[Event]) -> int:
        """Store events not stored yet (by ``Event.key``); returns how many."""
        rows = [queries.event_row(e) for e in events]
        return self._put("put_events", EventRow.__tablename__, rows, EVENT_KEY)

    def put_new_events(self, events: Sequence[Event]) -> list[Event]:
        """``put_events``, returning the events that were not stored before (a replay
        of the bus derives events again; only the new ones are published)."""
        rows = [queries.event_row(e) for e in events]
        new = self._transaction("put_events", lambda conn: bulk.insert_new(
            conn, EVENTS, rows, key=EVENT_KEY))
        self.metrics.written(EventRow.__tablename__, len(rows), len(new))
        return [e for e in events if e.key in new]

    def events(self, *, t0_ns: int, t1_ns: int, devices: Sequence[str] | None = None,
               entities: Sequence[str] | None = None, metric: str | None = None,
               kind: EventKind | str | None = None, limit: int = 10_000) -> list[Event]:
        """Events with t0_ns <= ts_ns <= t1_ns matching every filter given, the first
        ``limit`` by ts_ns, entity, metric, kind."""
        rows = self._query("events", partial(
            queries.events, t0_ns=t0_ns, t1_ns=t1_ns, devices=devices, entities=entities,
            metric=metric, kind=kind, limit=limit))
        return [queries.event_record(r) for r in rows]

    def put_int_paths(self, records: Sequence[IntPathRecord]) -> int:
        """Add (flow, path) observations; returns rows inserted or changed.

        A stored (flow, path) is merged: first/last seen widened, the largest hop
        latency kept, the sink of the latest report kept. ``n_reports`` is added
        when the record's window is disjoint from the stored one; an overlapping
        window (a re-delivery) keeps the larger count, so a repeat changes nothing.
        """
        rows = [queries.int_path_row(r) for r in merge_int_paths(records)]
        return self._put("put_int_paths", IntPathRow.__tablename__, rows, INT_PATH_KEY,
                         offered=len(records), upsert=queries.INT_PATH_MERGE)

    def int_paths(self, *, t0_ns: int, t1_ns: int,
                  switch: str | None = None) -> list[IntPathRecord]:
        """(flow, path)s seen within [t0_ns, t1_ns] (crossing ``switch`` if given),
        ordered by flow and path."""
        rows = self._query("int_paths",
                           partial(queries.int_paths, t0_ns=t0_ns, t1_ns=t1_ns, switch=switch))
        records = [queries.int_path_record(r) for r in rows]
        return records if switch is None else queries.crossing(records, switch)

    def stage_frames(self, frames: Sequence[Frame]) -> int:
        """Keep frames of open windows until ``close_window`` (by device, source, ts_ns)."""
        rows = [{"device": f.device, "source": str(f.source), "ts_ns": f.ts_ns, "seq": f.seq,
                 "frame": f.encode()} for f in frames]
        return self._put("stage_frames", StagedFrameRow.__tablename__, rows, STAGED_KEY)

    def staged_frames(self, *, device: str | None = None, source: str | None = None,
                      t0_ns: int | None = None, t1_ns: int | None = None) -> list[Frame]:
        """Staged frames (of ``device`` / ``source``, with t0_ns <= ts_ns < t1_ns, where
        given), by device, source, ts_ns. A frame that no longer decodes is skipped,
        counted and logged."""
        from fabricops.core.frame import Frame, FrameDecodeError

        rows = self._query("staged_frames", partial(queries.staged, device=device, source=source,
                                                    t0_ns=t0_ns, t1_ns=t1_ns))
        frames = []
        for row in rows:
            try:
                frames.append(Frame.decode(row.frame))
            except FrameDecodeError as exc:
                self.metrics.errors.labels("staged_frames_decode").inc()
                _log.warning("database %s: staged frame of %s/%s at %d skipped: %s",
                             self.url, row.device, row.source, row.ts_ns, exc)
        return frames

    def close_window(self, segments: Sequence[SegmentRecord], *, device: str, source: str,
                     before_ts_ns: int, state: bytes | None = None,
                     window: tuple[int, int] | None = None) -> int:
        """``close_windows`` of one window. Returns segments inserted."""
        return self._close("close_window", [WindowClose(
            device, str(source), window, segments, before_ts_ns, state)])

    def close_windows(self, closes: Sequence[WindowClose]) -> int:
        """In one transaction, for each ``WindowClose``: replace the segments that lie
        in its window (start in it and end before its end; a merged segment reaching
        past it stays) with its segments, drop the frames an older version staged for it
        (ts_ns within the window and before ``before_ts_ns``) and save its checkpoint (an
        older one never replaces a newer one). Returns segments inserted.

        Closes are applied in (device, source, window) order, the order a merge locks
        streams in. A segment of a window that cannot be inserted (a merged segment
        committed after the writer read the window has its key) fails the whole write
        with a transient StoreError: read the window again and write it again. Two
        segments with one key in one call are a caller's error (not transient)."""
        return self._close("close_windows", closes)

    def _close(self, op: str, closes: Sequence[WindowClose]) -> int:
        closes = sorted(closes, key=lambda c: (c.device, c.source, c.window or (0, 0)))
        windowed = [queries.segment_row(r) for c in closes if c.window is not None
                    for r in c.segments]
        keys = {tuple(r[k] for k in SEGMENT_KEY) for r in windowed}
        if len(keys) < len(windowed):
            raise StoreError(f"{op} on database {self.url}: two segments of one write have "
                             "the same key (device, source, start, first sequence number)")
        plain = [queries.segment_row(r) for c in closes if c.window is None for r in c.segments]
        checkpoints = [{"device": c.device, "source": c.source, "ts_ns": c.before_ts_ns,
                        "state": c.state} for c in closes if c.state is not None]

        def work(conn: Connection) -> tuple[int, int]:
            deleted = 0
            for c in closes:
                stream, t0 = {"device": c.device, "source": c.source}, _FIRST_NS
                if c.window is not None:
                    t0 = c.window[0]
                    conn.execute(queries.WINDOW_SEGMENTS_DELETE,
                                 {**stream, "t0": t0, "t1": c.window[1]})
                deleted += conn.execute(queries.STAGED_DELETE,
                                        {**stream, "t0": t0, "before": c.before_ts_ns}).rowcount
            inserted = insert_rows(conn, SEGMENTS, windowed, key=SEGMENT_KEY)
            if inserted < len(windowed):
                raise StoreError(
                    f"{op} on database {self.url}: a segment written since the window was "
                    "read has the key of its new segment (a merge committed in between); "
                    "read the window again", transient=True)
            inserted += insert_rows(conn, SEGMENTS, plain, key=SEGMENT_KEY)
            insert_rows(conn, STREAM_STATES, checkpoints, key=STREAM_KEY,
                        upsert=queries.CHECKPOINT_MERGE)
            return deleted, inserted

        deleted, inserted = self._transaction(op, work)
        self.metrics.rows_deleted.labels(StagedFrameRow.__tablename__).inc(deleted)
        self.metrics.written(SegmentRow.__tablename__, len(windowed) + len(plain), inserted)
        return inserted

    def stream_states(self) -> dict[tuple[str, str], bytes]:
        """(device, source) -> the checkpoint ``close_window`` saved last."""
        return {key: state for key, (_, state) in self.stream_checkpoints().items()}

    def stream_checkpoints(self) -> dict[tuple[str, str], tuple[int, bytes]]:
        """(device, source) -> (the time it covers frames before, the checkpoint)."""
        stmt = select(STREAM_STATES.c.device, STREAM_STATES.c.source, STREAM_STATES.c.ts_ns,
                      STREAM_STATES.c.state)
        rows = self._read("stream_states", lambda conn: conn.execute(stmt).all())
        return {(device, source): (int(ts), bytes(state)) for device, source, ts, state in rows}

    def prune(self, *, now_ns: int, batch: int = 10_000,
              stop: Callable[[], bool] | None = None) -> int:
        """Delete telemetry older than ``retention_s`` before ``now_ns``: segments and
        INT paths that ended, events, staged frames and diagnosis revisions stamped,
        before the cutoff; rows deleted. At most ``batch`` rows a transaction, so
        writers wait for one batch at most; once ``stop()`` is true, after the batch in
        progress, the rest is left for the next call."""
        cutoff = now_ns - round(self.config.retention_s * 1e9)
        deleted = 0
        for table, stmt in queries.prune(cutoff, batch).items():
            while not (stop is not None and stop()):
                n = self._transaction("prune", partial(_rowcount, stmt))
                self.metrics.rows_deleted.labels(table).inc(n)
                deleted += n
                if n < batch:
                    break
                time.sleep(PRUNE_PAUSE_S)  # a writer waiting for the lock takes it now
        return deleted


def _rowcount(stmt: Any, conn: Connection) -> int:
    """Rows ``stmt`` changed, run on ``conn``."""
    return int(conn.execute(stmt).rowcount)
