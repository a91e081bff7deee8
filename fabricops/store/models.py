"""The store's tables (SQLAlchemy 2 declarative), one class per table.

Times are ns since the Unix epoch (signed 64-bit). Sequence numbers are the
frames' per-device ``seq``; the store keeps them as signed 64-bit, so values up
to 2**63-1. Text identifiers (device, entity, metric, source) are the names the
rest of fabricops uses (:mod:`fabricops.core.entities`, the metric catalogue).
The migrations in ``migrations/versions`` create exactly these tables; a test
compares the two.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    BigInteger,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RowId = BigInteger().with_variant(Integer(), "sqlite")
"""Surrogate keys: BIGSERIAL on PostgreSQL, the rowid alias on SQLite."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class SeriesRow(Base):
    """One series: a catalogue metric measured on one entity of one device."""

    __tablename__ = "series"
    __table_args__ = (UniqueConstraint("entity", "metric"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    device: Mapped[str] = mapped_column(String(255), index=True)
    entity: Mapped[str] = mapped_column(String(255))
    metric: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))


class SegmentRow(Base):
    """A closed, compressed window of one device's frames from one source."""

    __tablename__ = "segments"
    __table_args__ = (
        UniqueConstraint("device", "source", "t_start_ns", "first_seq"),
        Index(None, "device", "t_start_ns"),
        Index(None, "t_end_ns"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    device: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(String(16))
    t_start_ns: Mapped[int] = mapped_column(BigInteger)
    t_end_ns: Mapped[int] = mapped_column(BigInteger)
    first_seq: Mapped[int] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    n_points: Mapped[int] = mapped_column(BigInteger)
    n_series: Mapped[int] = mapped_column(Integer)
    encoding: Mapped[str] = mapped_column(String(64))
    max_error: Mapped[float] = mapped_column(Double)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class EventRow(Base):
    """A key change (:class:`fabricops.core.records.Event`), kept at full resolution.

    A NaN ``value`` is stored as NULL (SQLite cannot hold NaN) and read back as NaN.
    """

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("ts_ns", "entity", "metric", "kind"),
        Index(None, "entity", "ts_ns"),
        Index(None, "device", "ts_ns"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    device: Mapped[str] = mapped_column(String(255))
    entity: Mapped[str] = mapped_column(String(255))
    metric: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(32))
    value: Mapped[float | None] = mapped_column(Double, nullable=True)
    severity: Mapped[str] = mapped_column(String(16))
    detail: Mapped[str] = mapped_column(Text)


class IntPathRow(Base):
    """One (flow, path) seen in INT reports, with when and how often."""

    __tablename__ = "int_paths"
    __table_args__ = (
        UniqueConstraint("src_ip", "dst_ip", "sport", "dport", "proto", "path"),
        Index(None, "last_ts_ns"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    src_ip: Mapped[str] = mapped_column(String(45))
    dst_ip: Mapped[str] = mapped_column(String(45))
    sport: Mapped[int] = mapped_column(Integer)
    dport: Mapped[int] = mapped_column(Integer)
    proto: Mapped[int] = mapped_column(Integer)
    sink: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(Text)
    first_ts_ns: Mapped[int] = mapped_column(BigInteger)
    last_ts_ns: Mapped[int] = mapped_column(BigInteger)
    n_reports: Mapped[int] = mapped_column(BigInteger)
    max_hop_latency_ns: Mapped[int] = mapped_column(BigInteger)


class StagedFrameRow(Base):
    """An encoded frame of a window not yet closed into a segment."""

    __tablename__ = "staged_frames"
    __table_args__ = (UniqueConstraint("device", "source", "ts_ns"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    device: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(String(16))
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    seq: Mapped[int] = mapped_column(BigInteger)
    frame: Mapped[bytes] = mapped_column(LargeBinary)


class StreamStateRow(Base):
    """The pipeline's checkpoint of one (device, source) stream, saved as a window
    is written: it covers the frames before ``ts_ns``; the bus delivers later ones
    again after a restart."""

    __tablename__ = "stream_states"
    __table_args__ = (UniqueConstraint("device", "source"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    device: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(String(16))
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[bytes] = mapped_column(LargeBinary)


class DiagnosisRow(Base):
    """One revision of an RCA diagnosis (:class:`fabricops.core.records.Diagnosis`).

    ``diagnosis_id`` is the incident's id, shared by its revisions; ``body`` is
    the whole record (``Diagnosis.encode()``), the other columns are copies of
    its fields to filter on.
    """

    __tablename__ = "diagnoses"
    __table_args__ = (
        UniqueConstraint("diagnosis_id", "ts_ns"),
        Index(None, "ts_ns"),
        Index(None, "root"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    diagnosis_id: Mapped[str] = mapped_column(String(64))
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    onset_ns: Mapped[int] = mapped_column(BigInteger)
    root: Mapped[str] = mapped_column(String(255))
    root_kind: Mapped[str] = mapped_column(String(16))
    fault_type: Mapped[str] = mapped_column(String(32))
    confidence: Mapped[float] = mapped_column(Double)
    body: Mapped[bytes] = mapped_column(LargeBinary)


class ActionRow(Base):
    """A remediation action (:class:`fabricops.core.actions.Action`) as it is now.

    ``body`` is the whole record (``Action.encode()``), the other columns are
    copies of its fields to filter on. Actions are never pruned: with
    ``action_log`` they are the record of what fabricops did to the fabric.
    """

    __tablename__ = "actions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    diagnosis_id: Mapped[str] = mapped_column(String(64), index=True)
    created_ns: Mapped[int] = mapped_column(BigInteger)
    ts_ns: Mapped[int] = mapped_column(BigInteger, index=True)
    kind: Mapped[str] = mapped_column(String(32))
    target: Mapped[str] = mapped_column(String(255))
    fault_type: Mapped[str] = mapped_column(String(32))
    state: Mapped[str] = mapped_column(String(16), index=True)
    mode: Mapped[str] = mapped_column(String(16))
    confidence: Mapped[float] = mapped_column(Double)
    request: Mapped[str] = mapped_column(String(16))
    body: Mapped[bytes] = mapped_column(LargeBinary)


class ActionLogRow(Base):
    """One audit entry of an action; ``seq`` is its index in ``Action.audit``."""

    __tablename__ = "action_log"
    __table_args__ = (UniqueConstraint("action_id", "seq"),)

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    action_id: Mapped[str] = mapped_column(String(64), ForeignKey("actions.id"))
    seq: Mapped[int] = mapped_column(Integer)
    ts_ns: Mapped[int] = mapped_column(BigInteger)
    actor: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))
    note: Mapped[str] = mapped_column(Text)


SERIES: Final[Table] = Base.metadata.tables["series"]
SEGMENTS: Final[Table] = Base.metadata.tables["segments"]
EVENTS: Final[Table] = Base.metadata.tables["events"]
INT_PATHS: Final[Table] = Base.metadata.tables["int_paths"]
STAGED_FRAMES: Final[Table] = Base.metadata.tables["staged_frames"]
STREAM_STATES: Final[Table] = Base.metadata.tables["stream_states"]
DIAGNOSES: Final[Table] = Base.metadata.tables["diagnoses"]
ACTIONS: Final[Table] = Base.metadata.tables["actions"]
ACTION_LOG: Final[Table] = Base.metadata.tables["action_log"]


class WebhookOutboxRow(Base):
    """One alert waiting for (or done with) delivery to one webhook receiver.

    ``event_key`` names the record it renders (a diagnosis revision, an action
    version), so a record enqueued again for the same ``receiver`` is stored
    once. ``body`` is the JSON document posted, rendered when enqueued.
    ``state`` is ``pending`` until the receiver accepts it (``delivered``) or
    it is given up (``dead``, the cause in ``last_error``). A pending row is
    due at ``next_attempt_ns``, which a sender's claim also pushes forward
    while it delivers. ``attempts`` counts the POSTs tried; ``done_ns`` is when
    the row was delivered or given up.
    """

    __tablename__ = "webhook_outbox"
    __table_args__ = (
        UniqueConstraint("receiver", "event_key"),
        Index(None, "receiver", "state", "id"),
        Index(None, "state", "done_ns"),
    )

    id: Mapped[int] = mapped_column(RowId, primary_key=True)
    receiver: Mapped[str] = mapped_column(String(64))
    event_key: Mapped[str] = mapped_column(String(255))
    event: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    created_ns: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_ns: Mapped[int] = mapped_column(BigInteger)
    last_error: Mapped[str] = mapped_column(Text)
    done_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


WEBHOOK_OUTBOX: Final[Table] = Base.metadata.tables["webhook_outbox"]
