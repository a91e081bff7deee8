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
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import Connection, Engine, Row, Select, Table, delete, func, select
from sqlalchemy.exc import SQLAlchemyError

from fabricops.core.actions import Action, ActionState
from fabricops.core.records import Diagnosis, Event, EventKind
from fabricops.store import actions as action_tables
from fabricops.store import bulk, queries
from fabricops.store import outbox as outbox_tables
from fabricops.store.bulk import UnsupportedDialectError, insert_rows
from fabricops.store.database import (
    DatabaseUrlError,
    build_engine,
    describe_error,
    display_url,
    is_unavailable,
    parse_url,
)
from fabricops.store.metrics import StoreMetrics
from fabricops.store.models import (
    EVENTS,
    SEGMENTS,
    STREAM_STATES,
    ActionLogRow,
    ActionRow,
    Base,
    DiagnosisRow,
    EventRow,
    IntPathRow,
    SegmentRow,
    SeriesRow,
    StagedFrameRow,
    WebhookOutboxRow,
)
from fabricops.store.outbox import OutboxEntry, OutboxRow, OutboxState
from fabricops.store.records import (
    IntPathRecord,
    SegmentRecord,
    SeriesRecord,
    WindowClose,
    merge_int_paths,
)
from fabricops.store.schema import SchemaVersionError, prepare, schema_errors

if TYPE_CHECKING:
    from fabricops.core.frame import Frame

T = TypeVar("T")
_log = logging.getLogger(__name__)

SERIES_KEY = ("entity", "metric")
SEGMENT_KEY = ("device", "source", "t_start_ns", "first_seq")
EVENT_KEY = ("ts_ns", "entity", "metric", "kind")
INT_PATH_KEY = ("src_ip", "dst_ip", "sport", "dport", "proto", "path")
STAGED_KEY = ("device", "source", "ts_ns")
STREAM_KEY = ("device", "source")
DIAGNOSIS_KEY = ("diagnosis_id", "ts_ns")
_FAILURES = (SQLAlchemyError, UnsupportedDialectError, OverflowError)


def _replace_build(excluded: Any, table: Table) -> tuple[dict[str, Any], Any]:
    cols = ("t_end_ns", "last_seq", "n_points", "n_series", "encoding", "max_error", "payload")
    return {c: excluded[c] for c in cols}, table.c.payload != excluded.payload


_REPLACE = bulk.Upsert(_replace_build)


def _start_failures() -> tuple[type[Exception], ...]:
    """What ``start`` turns into StoreError, looked up when a start fails."""
    return (*_FAILURES, *schema_errors())


class StoreConfig(BaseModel):
    """Where the store is and how long it keeps telemetry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(default="sqlite:///fabricops.db", min_length=1,
                     description="SQLAlchemy URL; postgresql:// uses psycopg 3")
    migrate_on_start: bool = Field(
        default=True, description="Upgrade the schema on start; else require it at head")
    retention_s: float = Field(default=7 * 86400, gt=0,
                               description="prune() deletes telemetry older than this")
    timeout_s: float = Field(default=5.0, gt=0, le=300,
                             description="PostgreSQL connect timeout; SQLite lock wait")


class StoreError(RuntimeError):
    """A store operation failed; the message names the database and the cause.

    ``transient`` is True when the database could not be reached or was busy
    (waiting and retrying the same write may succeed), False when the data or
    the request is at fault (retrying cannot help)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class ActionConflict(StoreError):  # noqa: N818  (the name other modules use)
    """An action write lost a race or asked for a move its state does not allow; the
    message names the action, its current state and what was asked."""


class ActionNotFound(StoreError, LookupError):  # noqa: N818  (the name other modules use)
    """No action has the id asked for; the message names it."""


class Store:
    """Telemetry tables behind one engine; see the module docstring."""

    def __init__(self, config: StoreConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = StoreMetrics(self.registry)
        self.url = display_url(config.url)
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine | None:
        """The SQLAlchemy engine while started (for read-only statistics), else None."""
        return self._engine

    def start(self) -> None:
        """Connect, then migrate to head (or check the schema is at head)."""
        if self._engine is not None:
            return
        try:
            engine = build_engine(parse_url(self.config.url), timeout_s=self.config.timeout_s)
        except DatabaseUrlError as exc:
            self.metrics.errors.labels("start").inc()
            raise StoreError(f"database {self.url}: {exc}") from exc
        try:
            prepare(engine, migrate=self.config.migrate_on_start)
        except _start_failures() as exc:
            engine.dispose()
            self.metrics.errors.labels("start").inc()
            cause = str(exc) if isinstance(exc, SchemaVersionError) else describe_error(exc)
            raise StoreError(f"database {self.url}: {cause}") from exc
        self._engine = engine

    def stop(self) -> None:
        """Close every pooled connection; the store may be started again."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

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
        """In one transaction, for each ``WindowClose``: replace the segments that start
        in its window with its segments, drop the frames an older version staged for it
        (ts_ns within the window and before ``before_ts_ns``) and save its checkpoint (an
        older one never replaces a newer one). Returns segments inserted."""
        return self._close("close_windows", closes)

    def _close(self, op: str, closes: Sequence[WindowClose]) -> int:
        rows = [queries.segment_row(r) for c in closes for r in c.segments]
        checkpoints = [{"device": c.device, "source": c.source, "ts_ns": c.before_ts_ns,
                        "state": c.state} for c in closes if c.state is not None]

        def work(conn: Connection) -> tuple[int, int]:
            deleted = 0
            for c in closes:
                unstage = delete(StagedFrameRow).where(
                    StagedFrameRow.device == c.device, StagedFrameRow.source == c.source,
                    StagedFrameRow.ts_ns < c.before_ts_ns)
                if c.window is not None:
                    unstage = unstage.where(StagedFrameRow.ts_ns >= c.window[0])
                    conn.execute(delete(SegmentRow).where(
                        SegmentRow.device == c.device, SegmentRow.source == c.source,
                        SegmentRow.t_start_ns >= c.window[0],
                        SegmentRow.t_start_ns < c.window[1]))
                deleted += conn.execute(unstage).rowcount
            inserted = insert_rows(conn, SEGMENTS, rows, key=SEGMENT_KEY)
            insert_rows(conn, STREAM_STATES, checkpoints, key=STREAM_KEY,
                        upsert=queries.CHECKPOINT_MERGE)
            return deleted, inserted

        deleted, inserted = self._transaction(op, work)
        self.metrics.rows_deleted.labels(StagedFrameRow.__tablename__).inc(deleted)
        self.metrics.written(SegmentRow.__tablename__, len(rows), inserted)
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

    def put_diagnoses(self, diagnoses: Sequence[Diagnosis]) -> int:
        """Store diagnosis revisions not stored yet (by ``id`` and ``ts_ns``)."""
        rows = [queries.diagnosis_row(d) for d in diagnoses]
        return self._put("put_diagnoses", DiagnosisRow.__tablename__, rows, DIAGNOSIS_KEY)

    def diagnoses(self, *, t0_ns: int, t1_ns: int, root: str | None = None,
                  diagnosis_id: str | None = None, limit: int | None = None) -> list[Diagnosis]:
        """Revisions with t0_ns <= ts_ns <= t1_ns (of ``root`` and/or incident
        ``diagnosis_id`` if given), the first ``limit`` (all if None) by ts_ns, id."""
        rows = self._query("diagnoses", partial(
            queries.diagnoses, t0_ns=t0_ns, t1_ns=t1_ns, root=root, diagnosis_id=diagnosis_id,
            limit=limit))
        return self._decode_diagnoses("diagnoses", rows)

    def latest_diagnoses(self, limit: int = 20) -> list[Diagnosis]:
        """The newest revision of each of the ``limit`` incidents revised last, newest
        first."""
        rows = self._query("latest_diagnoses", partial(queries.latest_diagnoses, limit=limit))
        return self._decode_diagnoses("latest_diagnoses", rows)

    def put_action(self, action: Action, *, prior: Action | None = None) -> Action:
        """Store a proposed action (``prior`` None) or the next version of one, and its
        new audit entries; returns the action as stored.

        Without ``prior`` a stored action with the same id is kept and returned (a
        repeated proposal). With ``prior``, the version ``action`` was made from, the
        write happens only if the stored audit trail still has ``len(prior.audit)``
        entries and ``action``'s begins with them, else ActionConflict (ActionNotFound if
        nothing is stored)."""
        return self._write_action("put_action", action.id, partial(
            action_tables.put, action=action, prior=prior))

    def transition_action(self, action_id: str, *, to: ActionState | None, actor: str,
                          note: str = "", ts_ns: int, request: str | None = None) -> Action:
        """Move the stored action to ``to`` (None: keep its state) with an audit entry, in
        one transaction that locks the row; ``request`` replaces its request if given.
        ActionConflict if TRANSITIONS forbids the move, ActionNotFound if no action has
        that id. Returns the action as stored."""
        return self._write_action("transition_action", action_id, partial(
            action_tables.move, action_id=action_id, to=to, actor=actor, note=note,
            ts_ns=ts_ns, request=request))

    def action(self, action_id: str) -> Action | None:
        """The action with that id, None if there is none."""
        found = self._read_actions("action", partial(queries.action, action_id=action_id))
        return found[0] if found else None

    def actions(self, *, state: ActionState | None = None, diagnosis_id: str | None = None,
                limit: int = 50) -> list[Action]:
        """The ``limit`` actions changed last (in ``state`` / for incident ``diagnosis_id``
        if given), newest ``ts_ns`` first."""
        return self._read_actions("actions", partial(
            queries.actions, state=state, diagnosis_id=diagnosis_id, limit=limit))

    def pending_actions(self) -> list[Action]:
        """What the remediation service must act on: approved actions and actions with a
        request (a rollback), oldest change first."""
        return self._read_actions("pending_actions", queries.pending_actions)

    def enqueue_alerts(self, entries: Sequence[OutboxEntry], *, now_ns: int) -> int:
        """Add alerts to the webhook outbox, due at ``now_ns``; an entry whose (receiver,
        event_key) is stored already is skipped. Returns how many were new."""
        changed = self._transaction("enqueue_alerts", partial(
            outbox_tables.enqueue, entries=entries, now_ns=now_ns))
        self.metrics.written(WebhookOutboxRow.__tablename__, len(entries), changed)
        return changed

    def due_alerts(self, receiver: str, *, now_ns: int, lease_s: float,
                   limit: int = 20) -> list[OutboxRow]:
        """Claim up to ``limit`` of ``receiver``'s oldest pending alerts if due at
        ``now_ns``, oldest first, for ``lease_s`` (see :mod:`fabricops.store.outbox`);
        [] if the oldest is not due or another sender claimed them first."""
        try:
            return self._transaction("due_alerts", partial(
                outbox_tables.claim, receiver=receiver, now_ns=now_ns,
                lease_ns=round(lease_s * 1e9), limit=limit))
        except outbox_tables.ClaimLostError:
            return []

    def mark_alert_delivered(self, row_id: int, *, now_ns: int) -> bool:
        """The receiver accepted alert ``row_id``; False if it was not pending."""
        return self._transaction("mark_alert_delivered", partial(
            outbox_tables.mark_delivered, row_id=row_id, now_ns=now_ns))

    def retry_alert(self, row_id: int, *, next_attempt_ns: int, error: str) -> bool:
        """An attempt at alert ``row_id`` failed with ``error``: count it, keep the cause,
        try again at ``next_attempt_ns``. False if it was not pending."""
        return self._transaction("retry_alert", partial(
            outbox_tables.reschedule, row_id=row_id, next_attempt_ns=next_attempt_ns,
            error=error))

    def mark_alert_dead(self, row_id: int, *, now_ns: int, error: str) -> bool:
        """An attempt at alert ``row_id`` failed with ``error`` and it is given up (kept,
        with the cause). False if it was not pending."""
        return self._transaction("mark_alert_dead", partial(
            outbox_tables.mark_dead, row_id=row_id, now_ns=now_ns, error=error))

    def release_alerts(self, row_ids: Sequence[int], *, now_ns: int) -> int:
        """Claimed alerts that were not tried are due again at ``now_ns``."""
        return self._transaction("release_alerts", partial(
            outbox_tables.release, row_ids=row_ids, now_ns=now_ns))

    def pending_alerts(self) -> dict[str, int]:
        """Receiver -> alerts pending in the outbox (receivers with none are absent)."""
        return self._read("pending_alerts", outbox_tables.pending_counts)

    def alerts(self, *, receiver: str | None = None, state: OutboxState | None = None,
               limit: int = 1000) -> list[OutboxRow]:
        """The first ``limit`` outbox rows (of ``receiver`` / in ``state`` if given), oldest
        first."""
        return self._read("alerts", partial(outbox_tables.rows, receiver=receiver,
                                            state=state, limit=limit))

    def prune_alerts(self, *, before_ns: int) -> int:
        """Delete alerts delivered before ``before_ns`` (pending and dead ones stay)."""
        deleted = self._transaction("prune_alerts", partial(
            outbox_tables.prune, before_ns=before_ns))
        self.metrics.rows_deleted.labels(WebhookOutboxRow.__tablename__).inc(deleted)
        return deleted

    def prune(self, *, now_ns: int) -> int:
        """Delete telemetry older than ``retention_s`` before ``now_ns``: segments and
        INT paths that ended, events, staged frames and diagnosis revisions stamped,
        before the cutoff."""
        cutoff = now_ns - round(self.config.retention_s * 1e9)
        stmts = queries.prune(cutoff)

        def work(conn: Connection) -> dict[str, int]:
            return {table: conn.execute(stmt).rowcount for table, stmt in stmts.items()}

        deleted = self._transaction("prune", work)
        for table, n in deleted.items():
            self.metrics.rows_deleted.labels(table).inc(n)
        return sum(deleted.values())

    def _decode_diagnoses(self, op: str, rows: Sequence[Row[Any]]) -> list[Diagnosis]:
        """The rows' diagnoses; a body that no longer decodes is skipped, counted, logged."""
        decoded = []
        for row in rows:
            try:
                decoded.append(Diagnosis.decode(bytes(row.body)))
            except ValidationError as exc:
                self.metrics.errors.labels(f"{op}_decode").inc()
                _log.warning("database %s: diagnosis %s at %d skipped: %s",
                             self.url, row.diagnosis_id, row.ts_ns, exc)
        return decoded

    def _write_action(self, op: str, action_id: str,
                      work: Callable[[Connection], action_tables.Outcome]) -> Action:
        """Run an action write; its refusal raised, its rows counted."""
        try:
            outcome = self._transaction(op, work)
        except action_tables.BodyDecodeError as exc:
            self.metrics.errors.labels(f"{op}_decode").inc()
            raise StoreError(f"{op} on database {self.url}: {exc}") from exc
        if outcome.action is None:
            self.metrics.errors.labels(f"{op}_not_found").inc()
            raise ActionNotFound(f"{op} on database {self.url}: no action has id {action_id!r}")
        if outcome.refused:
            self.metrics.errors.labels(f"{op}_conflict").inc()
            raise ActionConflict(f"{op} on database {self.url}: {outcome.refused}")
        self.metrics.written(ActionRow.__tablename__, 1, outcome.written)
        self.metrics.written(ActionLogRow.__tablename__, outcome.logged, outcome.logged)
        return outcome.action

    def _read_actions(self, op: str, build: Callable[[str], Select[Any]]) -> list[Action]:
        """The actions of the rows ``build`` selects; a body that no longer decodes is
        skipped, counted, logged."""
        found, broken = action_tables.decode(self._query(op, build))
        for action_id, cause in broken:
            self.metrics.errors.labels(f"{op}_decode").inc()
            _log.warning("database %s: action %s skipped: %s", self.url, action_id, cause)
        return found

    def _put(self, op: str, table: str, rows: Sequence[Mapping[str, object]],
             key: Sequence[str], *,
             offered: int | None = None, upsert: bulk.Upsert | None = None) -> int:
        target = Base.metadata.tables[table]
        changed = self._transaction(
            op, lambda conn: insert_rows(conn, target, rows, key=key, upsert=upsert))
        self.metrics.written(table, len(rows) if offered is None else offered, changed)
        return changed

    def _transaction(self, op: str, work: Callable[[Connection], T]) -> T:
        engine = self._running(op)
        started = time.perf_counter()
        try:
            with engine.begin() as conn:
                result = work(conn)
        except _FAILURES as exc:
            self.metrics.errors.labels(op).inc()
            raise StoreError(f"{op} on database {self.url}: {describe_error(exc)}",
                             transient=is_unavailable(exc)) from exc
        self.metrics.write_seconds.labels(op).observe(time.perf_counter() - started)
        return result

    def _query(self, op: str, build: Callable[[str], Select[Any]]) -> Sequence[Row[Any]]:
        """Rows of the statement ``build`` makes for the database's dialect name."""
        return self._read(op, lambda conn: conn.execute(build(conn.dialect.name)).all())

    def _read(self, op: str, work: Callable[[Connection], T]) -> T:
        engine = self._running(op)
        try:
            with engine.connect() as conn:
                return work(conn)
        except _FAILURES as exc:
            self.metrics.errors.labels(op).inc()
            raise StoreError(f"{op} on database {self.url}: {describe_error(exc)}",
                             transient=is_unavailable(exc)) from exc

    def _running(self, op: str) -> Engine:
        if self._engine is None:
            raise StoreError(f"{op} on database {self.url}: the store is not started",
                             transient=True)
        return self._engine
