"""Telemetry tables: series, segments, events, int_paths, staged_frames.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _row_id() -> sa.Column[int]:
    """Surrogate key: BIGSERIAL on PostgreSQL, the rowid alias on SQLite."""
    return sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False)


def _name(width: int = 255) -> sa.String:
    return sa.String(length=width)


def _ns() -> sa.BigInteger:
    return sa.BigInteger()


def upgrade() -> None:
    op.create_table(
        "series",
        _row_id(),
        sa.Column("device", _name(), nullable=False),
        sa.Column("entity", _name(), nullable=False),
        sa.Column("metric", _name(), nullable=False),
        sa.Column("kind", _name(16), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_series"),
        sa.UniqueConstraint("entity", "metric", name="uq_series_entity_metric"),
    )
    op.create_index("ix_series_device", "series", ["device"])

    op.create_table(
        "segments",
        _row_id(),
        sa.Column("device", _name(), nullable=False),
        sa.Column("source", _name(16), nullable=False),
        sa.Column("t_start_ns", _ns(), nullable=False),
        sa.Column("t_end_ns", _ns(), nullable=False),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_seq", sa.BigInteger(), nullable=False),
        sa.Column("n_points", sa.BigInteger(), nullable=False),
        sa.Column("n_series", sa.Integer(), nullable=False),
        sa.Column("encoding", _name(64), nullable=False),
        sa.Column("max_error", sa.Double(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_segments"),
        sa.UniqueConstraint("device", "source", "t_start_ns", "first_seq",
                            name="uq_segments_device_source_t_start_ns_first_seq"),
    )
    op.create_index("ix_segments_device_t_start_ns", "segments", ["device", "t_start_ns"])
    op.create_index("ix_segments_t_end_ns", "segments", ["t_end_ns"])

    op.create_table(
        "events",
        _row_id(),
        sa.Column("ts_ns", _ns(), nullable=False),
        sa.Column("device", _name(), nullable=False),
        sa.Column("entity", _name(), nullable=False),
        sa.Column("metric", _name(), nullable=False),
        sa.Column("kind", _name(32), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),  # NULL: NaN
        sa.Column("severity", _name(16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
        sa.UniqueConstraint("ts_ns", "entity", "metric", "kind",
                            name="uq_events_ts_ns_entity_metric_kind"),
    )
    op.create_index("ix_events_entity_ts_ns", "events", ["entity", "ts_ns"])
    op.create_index("ix_events_device_ts_ns", "events", ["device", "ts_ns"])

    op.create_table(
        "int_paths",
        _row_id(),
        sa.Column("src_ip", _name(45), nullable=False),
        sa.Column("dst_ip", _name(45), nullable=False),
        sa.Column("sport", sa.Integer(), nullable=False),
        sa.Column("dport", sa.Integer(), nullable=False),
        sa.Column("proto", sa.Integer(), nullable=False),
        sa.Column("sink", _name(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("first_ts_ns", _ns(), nullable=False),
        sa.Column("last_ts_ns", _ns(), nullable=False),
        sa.Column("n_reports", sa.BigInteger(), nullable=False),
        sa.Column("max_hop_latency_ns", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_int_paths"),
        sa.UniqueConstraint("src_ip", "dst_ip", "sport", "dport", "proto", "path",
                            name="uq_int_paths_src_ip_dst_ip_sport_dport_proto_path"),
    )
    op.create_index("ix_int_paths_last_ts_ns", "int_paths", ["last_ts_ns"])

    op.create_table(
        "staged_frames",
        _row_id(),
        sa.Column("device", _name(), nullable=False),
        sa.Column("source", _name(16), nullable=False),
        sa.Column("ts_ns", _ns(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("frame", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_staged_frames"),
        sa.UniqueConstraint("device", "source", "ts_ns",
                            name="uq_staged_frames_device_source_ts_ns"),
    )


def downgrade() -> None:
    for table in ("staged_frames", "int_paths", "events", "segments", "series"):
        op.drop_table(table)
