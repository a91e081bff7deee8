"""Statements the Store runs, and conversions between records and rows.

Query builders take the dialect name first: text columns are ordered bytewise
(``COLLATE "C"`` on PostgreSQL, ``BINARY`` on SQLite), so both databases
return the same rows in the same order whatever the server's locale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import (
    ColumnElement,
    Delete,
    Row,
    Select,
    String,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
)
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.elements import CollationClause

from fabricops.core.actions import Action, ActionState
from fabricops.core.records import Diagnosis, Event, EventKind
from fabricops.store.bulk import Upsert, greater, lesser
from fabricops.store.models import (
    DIAGNOSES,
    EVENTS,
    INT_PATHS,
    SEGMENTS,
    ActionRow,
    DiagnosisRow,
    EventRow,
    IntPathRow,
    SegmentRow,
    SeriesRow,
    StagedFrameRow,
)
from fabricops.store.records import IntPathRecord, SegmentRecord, path_switches

_OrderBy = ColumnElement[Any] | CollationClause | InstrumentedAttribute[Any]
_BYTEWISE: Final = {"postgresql": "C", "sqlite": "BINARY"}


def ordered_by(dialect: str, *columns: InstrumentedAttribute[Any]) -> list[_OrderBy]:
    """``columns`` for ORDER BY, text ones compared bytewise on ``dialect``."""
    collation = _BYTEWISE.get(dialect)
    return [c.collate(collation) if collation and isinstance(c.type, String) else c
            for c in columns]


def series(dialect: str, *, device: str | None, entity: str | None) -> Select[Any]:
    stmt = select(SeriesRow.device, SeriesRow.entity, SeriesRow.metric, SeriesRow.kind)
    if device is not None:
        stmt = stmt.where(SeriesRow.device == device)
    if entity is not None:
        stmt = stmt.where(SeriesRow.entity == entity)
    return stmt.order_by(*ordered_by(dialect, SeriesRow.device, SeriesRow.entity,
                                     SeriesRow.metric))


def segments(dialect: str, *, t0_ns: int, t1_ns: int, devices: Sequence[str] | None,
             source: str | None) -> Select[Any]:
    stmt = select(SEGMENTS).where(SegmentRow.t_start_ns <= t1_ns, SegmentRow.t_end_ns >= t0_ns)
    if devices is not None:
        stmt = stmt.where(SegmentRow.device.in_(list(devices)))
    if source is not None:
        stmt = stmt.where(SegmentRow.source == str(source))
    return stmt.order_by(*ordered_by(dialect, SegmentRow.device, SegmentRow.source,
                                     SegmentRow.t_start_ns, SegmentRow.first_seq))


def segments_starting(dialect: str, *, device: str, source: str, t0_ns: int,
                      t1_ns: int) -> Select[Any]:
    """One stream's segments with t0_ns <= t_start_ns < t1_ns (an index range scan)."""
    stmt = select(SEGMENTS).where(
        SegmentRow.device == device, SegmentRow.source == str(source),
        SegmentRow.t_start_ns >= t0_ns, SegmentRow.t_start_ns < t1_ns)
    return stmt.order_by(*ordered_by(dialect, SegmentRow.t_start_ns, SegmentRow.first_seq))


def events(dialect: str, *, t0_ns: int, t1_ns: int, devices: Sequence[str] | None,
           entities: Sequence[str] | None, metric: str | None, kind: EventKind | str | None,
           limit: int) -> Select[Any]:
    stmt = select(EVENTS).where(EventRow.ts_ns >= t0_ns, EventRow.ts_ns <= t1_ns)
    if devices is not None:
        stmt = stmt.where(EventRow.device.in_(list(devices)))
    if entities is not None:
        stmt = stmt.where(EventRow.entity.in_(list(entities)))
    if metric is not None:
        stmt = stmt.where(EventRow.metric == metric)
    if kind is not None:
        stmt = stmt.where(EventRow.kind == str(kind))
    order = ordered_by(dialect, EventRow.ts_ns, EventRow.entity, EventRow.metric, EventRow.kind)
    return stmt.order_by(*order).limit(limit)


def int_paths(dialect: str, *, t0_ns: int, t1_ns: int, switch: str | None) -> Select[Any]:
    """Paths seen within the range; with ``switch``, a superset (see ``crossing``)."""
    stmt = select(INT_PATHS).where(IntPathRow.first_ts_ns <= t1_ns,
                                    IntPathRow.last_ts_ns >= t0_ns)
    if switch is not None:
        stmt = stmt.where(IntPathRow.path.contains(switch, autoescape=True))
    return stmt.order_by(*ordered_by(dialect, IntPathRow.src_ip, IntPathRow.dst_ip,
                                     IntPathRow.sport, IntPathRow.dport, IntPathRow.proto,
                                     IntPathRow.path))


def crossing(records: Sequence[IntPathRecord], switch: str) -> list[IntPathRecord]:
    """The records whose path has ``switch`` as one of its hops."""
    return [r for r in records if switch in path_switches(r.path)]


def staged(dialect: str, *, device: str | None, source: str | None,
           t0_ns: int | None = None, t1_ns: int | None = None) -> Select[Any]:
    stmt = select(StagedFrameRow.device, StagedFrameRow.source, StagedFrameRow.ts_ns,
                  StagedFrameRow.frame)
    if t0_ns is not None:
        stmt = stmt.where(StagedFrameRow.ts_ns >= t0_ns)
    if t1_ns is not None:
        stmt = stmt.where(StagedFrameRow.ts_ns < t1_ns)
    if device is not None:
        stmt = stmt.where(StagedFrameRow.device == device)
    if source is not None:
        stmt = stmt.where(StagedFrameRow.source == str(source))
    return stmt.order_by(*ordered_by(dialect, StagedFrameRow.device, StagedFrameRow.source,
                                     StagedFrameRow.ts_ns))


def diagnoses(dialect: str, *, t0_ns: int, t1_ns: int, root: str | None,
              diagnosis_id: str | None, limit: int | None) -> Select[Any]:
    stmt = select(DIAGNOSES).where(DiagnosisRow.ts_ns >= t0_ns, DiagnosisRow.ts_ns <= t1_ns)
    if root is not None:
        stmt = stmt.where(DiagnosisRow.root == root)
    if diagnosis_id is not None:
        stmt = stmt.where(DiagnosisRow.diagnosis_id == diagnosis_id)
    stmt = stmt.order_by(*ordered_by(dialect, DiagnosisRow.ts_ns, DiagnosisRow.diagnosis_id))
    return stmt if limit is None else stmt.limit(limit)


def latest_diagnoses(dialect: str, *, limit: int) -> Select[Any]:
    """The newest row of each of the ``limit`` incidents with the newest rows, newest
    first (ties by diagnosis_id, bytewise)."""
    newest_ns = func.max(DiagnosisRow.ts_ns).label("newest_ns")
    (by_id,) = ordered_by(dialect, DiagnosisRow.diagnosis_id)
    newest = select(DiagnosisRow.diagnosis_id, newest_ns).group_by(DiagnosisRow.diagnosis_id) \
        .order_by(newest_ns.desc(), by_id).limit(limit).subquery()
    return select(DIAGNOSES) \
        .join(newest, (DiagnosisRow.diagnosis_id == newest.c.diagnosis_id)
              & (DiagnosisRow.ts_ns == newest.c.newest_ns)) \
        .order_by(DiagnosisRow.ts_ns.desc(), by_id)


def action(dialect: str, *, action_id: str) -> Select[Any]:
    """The row of ``action_id`` (id, ts_ns, body; none if there is no such action)."""
    return select(ActionRow.id, ActionRow.ts_ns, ActionRow.body).where(ActionRow.id == action_id)


def actions(dialect: str, *, state: ActionState | None, diagnosis_id: str | None,
            limit: int) -> Select[Any]:
    """The ``limit`` actions (of ``state`` / ``diagnosis_id`` if given) changed last,
    newest first (ties by id, bytewise)."""
    stmt = select(ActionRow.id, ActionRow.ts_ns, ActionRow.body)
    if state is not None:
        stmt = stmt.where(ActionRow.state == ActionState(state).value)
    if diagnosis_id is not None:
        stmt = stmt.where(ActionRow.diagnosis_id == diagnosis_id)
    (by_id,) = ordered_by(dialect, ActionRow.id)
    return stmt.order_by(ActionRow.ts_ns.desc(), by_id).limit(limit)


def pending_actions(dialect: str) -> Select[Any]:
    """Approved actions and actions with a request, oldest change first."""
    stmt = select(ActionRow.id, ActionRow.ts_ns, ActionRow.body).where(
        or_(ActionRow.state == ActionState.APPROVED.value, ActionRow.request != ""))
    return stmt.order_by(*ordered_by(dialect, ActionRow.ts_ns, ActionRow.id))


def prune(cutoff_ns: int, batch: int) -> dict[str, Delete]:
    """Per table, the statement deleting up to ``batch`` rows that ended before
    ``cutoff_ns`` (found through the table's time index; staged frames, a table
    only older versions wrote, have none)."""
    ends: tuple[tuple[str, Any, Any], ...] = (
        ("segments", SegmentRow, SegmentRow.t_end_ns),
        ("events", EventRow, EventRow.ts_ns),
        ("int_paths", IntPathRow, IntPathRow.last_ts_ns),
        ("staged_frames", StagedFrameRow, StagedFrameRow.ts_ns),
        ("diagnoses", DiagnosisRow, DiagnosisRow.ts_ns),
    )
    return {table: delete(row).where(row.id.in_(
        select(row.id).where(end < cutoff_ns).limit(batch).scalar_subquery()))
        for table, row, end in ends}


def segment_row(r: SegmentRecord) -> dict[str, object]:
    return {"device": r.device, "source": str(r.source), "t_start_ns": r.t_start_ns,
            "t_end_ns": r.t_end_ns, "first_seq": r.first_seq, "last_seq": r.last_seq,
            "n_points": r.n_points, "n_series": r.n_series, "encoding": r.encoding,
            "max_error": r.max_error, "payload": r.payload}


def segment_record(row: Row[Any]) -> SegmentRecord:
    s = row
    return SegmentRecord(s.device, s.source, s.t_start_ns, s.t_end_ns, s.first_seq, s.last_seq,
                         s.n_points, s.n_series, s.encoding, s.max_error, bytes(s.payload))


def event_row(e: Event) -> dict[str, object]:
    return {"ts_ns": e.ts_ns, "device": e.device, "entity": e.entity, "metric": e.metric,
            "kind": e.kind.value, "value": None if math.isnan(e.value) else e.value,
            "severity": e.severity.value,
            "detail": e.detail}


def event_record(row: Row[Any]) -> Event:
    e = row
    return Event.model_validate({
        "ts_ns": e.ts_ns, "device": e.device, "entity": e.entity, "metric": e.metric,
        "kind": e.kind, "value": math.nan if e.value is None else e.value,
        "severity": e.severity, "detail": e.detail})


def diagnosis_row(d: Diagnosis) -> dict[str, object]:
    return {"diagnosis_id": d.id, "ts_ns": d.ts_ns, "onset_ns": d.onset_ns, "root": d.root,
            "root_kind": d.root_kind, "fault_type": d.fault_type,
            "confidence": d.confidence, "body": d.encode()}


def action_row(a: Action) -> dict[str, object]:
    return {"id": a.id, "diagnosis_id": a.diagnosis_id, "created_ns": a.created_ns,
            "ts_ns": a.ts_ns, "kind": a.kind.value, "target": a.target,
            "fault_type": a.fault_type, "state": a.state.value, "mode": a.mode.value,
            "confidence": a.confidence, "request": a.request, "body": a.encode()}


def action_log_rows(a: Action, *, since: int) -> list[dict[str, object]]:
    """The ``action_log`` rows of ``a``'s audit entries from index ``since`` on."""
    return [{"action_id": a.id, "seq": seq, "ts_ns": e.ts_ns, "actor": e.actor,
             "state": e.state.value, "note": e.note}
            for seq, e in enumerate(a.audit[since:], start=since)]


def int_path_row(r: IntPathRecord) -> dict[str, object]:
    return {"src_ip": r.src_ip, "dst_ip": r.dst_ip, "sport": r.sport, "dport": r.dport,
            "proto": r.proto, "sink": r.sink, "path": r.path, "first_ts_ns": r.first_ts_ns,
            "last_ts_ns": r.last_ts_ns, "n_reports": r.n_reports,
            "max_hop_latency_ns": r.max_hop_latency_ns}


def int_path_record(row: Row[Any]) -> IntPathRecord:
    p = row
    return IntPathRecord(p.src_ip, p.dst_ip, p.sport, p.dport, p.proto, p.sink, p.path,
                         p.first_ts_ns, p.last_ts_ns, p.n_reports, p.max_hop_latency_ns)


def _merge_int_path(new: Any, table: Any) -> tuple[dict[str, ColumnElement[Any]],
                                                   ColumnElement[bool]]:
    """The SQL twin of :func:`fabricops.store.records.combine_int_paths`."""
    old = table.c
    disjoint = (new.first_ts_ns > old.last_ts_ns) | (new.last_ts_ns < old.first_ts_ns)
    newer = new.last_ts_ns > old.last_ts_ns
    set_ = {
        "sink": _if(newer, new.sink, old.sink),
        "first_ts_ns": lesser(old.first_ts_ns, new.first_ts_ns),
        "last_ts_ns": greater(old.last_ts_ns, new.last_ts_ns),
        "n_reports": _if(disjoint, old.n_reports + new.n_reports,
                         greater(old.n_reports, new.n_reports)),
        "max_hop_latency_ns": greater(old.max_hop_latency_ns, new.max_hop_latency_ns),
    }
    changed = (disjoint | newer | (new.first_ts_ns < old.first_ts_ns)
               | (new.n_reports > old.n_reports)
               | (new.max_hop_latency_ns > old.max_hop_latency_ns))
    return set_, changed


def _if(cond: ColumnElement[bool], then: Any, otherwise: Any) -> ColumnElement[Any]:
    return case((cond, then), else_=otherwise)


def _newer_checkpoint(new: Any, table: Any) -> tuple[dict[str, ColumnElement[Any]],
                                                     ColumnElement[bool]]:
    return {"ts_ns": new.ts_ns, "state": new.state}, new.ts_ns >= table.c.ts_ns


INT_PATH_MERGE: Final = Upsert(_merge_int_path)
CHECKPOINT_MERGE: Final = Upsert(_newer_checkpoint)

WINDOW_SEGMENTS_DELETE: Final = delete(SegmentRow).where(
    SegmentRow.device == bindparam("device"), SegmentRow.source == bindparam("source"),
    SegmentRow.t_start_ns >= bindparam("t0"), SegmentRow.t_start_ns < bindparam("t1"),
    SegmentRow.t_end_ns < bindparam("t1"))
"""The segments that lie in a window of a stream (start in it, end before its end).
Built once: a window write runs it for every window, and building a statement (and
its cache key) cost eight times what running it on SQLite does."""
STAGED_DELETE: Final = delete(StagedFrameRow).where(
    StagedFrameRow.device == bindparam("device"), StagedFrameRow.source == bindparam("source"),
    StagedFrameRow.ts_ns >= bindparam("t0"), StagedFrameRow.ts_ns < bindparam("before"))
"""The frames of a stream an older version staged, from ``t0`` to before ``before``."""
