"""diagnoses: RCA diagnoses, one row per revision of an incident.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "diagnoses",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("diagnosis_id", sa.String(length=64), nullable=False),
        sa.Column("ts_ns", sa.BigInteger(), nullable=False),
        sa.Column("onset_ns", sa.BigInteger(), nullable=False),
        sa.Column("root", sa.String(length=255), nullable=False),
        sa.Column("root_kind", sa.String(length=16), nullable=False),
        sa.Column("fault_type", sa.String(length=32), nullable=False),
        sa.Column("confidence", sa.Double(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_diagnoses"),
        sa.UniqueConstraint("diagnosis_id", "ts_ns", name="uq_diagnoses_diagnosis_id_ts_ns"),
    )
    op.create_index("ix_diagnoses_ts_ns", "diagnoses", ["ts_ns"])
    op.create_index("ix_diagnoses_root", "diagnoses", ["root"])


def downgrade() -> None:
    op.drop_table("diagnoses")
