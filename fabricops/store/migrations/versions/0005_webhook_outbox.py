"""webhook_outbox: alerts rendered for each webhook receiver, until delivered or given up.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-13
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_outbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("receiver", sa.String(length=64), nullable=False),
        sa.Column("event_key", sa.String(length=255), nullable=False),
        sa.Column("event", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_ns", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_ns", sa.BigInteger(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("done_ns", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_outbox"),
        sa.UniqueConstraint("receiver", "event_key",
                            name="uq_webhook_outbox_receiver_event_key"),
    )
    op.create_index("ix_webhook_outbox_receiver_state_id", "webhook_outbox",
                    ["receiver", "state", "id"])
    op.create_index("ix_webhook_outbox_state_done_ns", "webhook_outbox", ["state", "done_ns"])


def downgrade() -> None:
    op.drop_table("webhook_outbox")
