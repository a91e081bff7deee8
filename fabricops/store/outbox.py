"""The webhook outbox: alerts waiting for delivery, one row per receiver and record.

Functions run inside the caller's transaction (``Store`` opens one per call)
and work on SQLite and PostgreSQL. A row moves

    pending -> delivered        (the receiver answered 2xx)
    pending -> dead             (refused, or failing past the give-up age)

and is never deleted while pending or dead; ``prune`` deletes delivered rows.

Order and claims: a receiver's rows are delivered oldest first (by ``id``).
``claim`` hands out the due rows at the head of a receiver's queue and
pushes their ``next_attempt_ns`` ``lease_ns`` ahead, so another sender on the
same database skips them; while the head row waits for its retry, nothing
behind it is handed out. The sender then settles each row
(``mark_delivered``, ``reschedule``, ``mark_dead``) and hands back those it
did not try (``release``). A sender that dies leaves its rows to be claimed
again when the lease runs out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import takewhile
from typing import Any, Final

from sqlalchemy import Connection, Row, Update, delete, func, select, update

from fabricops.store.bulk import insert_rows
from fabricops.store.models import WEBHOOK_OUTBOX, WebhookOutboxRow

OUTBOX_KEY: Final = ("receiver", "event_key")
MAX_ERROR_CHARS: Final = 2000


class OutboxState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    DEAD = "dead"


@dataclass(frozen=True)
class OutboxEntry:
    """An alert to enqueue: ``body`` (JSON text) posted to ``receiver`` as ``event``.

    ``event_key`` names the record rendered (e.g. ``diagnosis:inc-7@1700000000``);
    an entry whose (receiver, event_key) is stored already is not enqueued again.
    """

    receiver: str
    event_key: str
    event: str
    body: str


@dataclass(frozen=True)
class OutboxRow:
    """A stored outbox row (see :class:`fabricops.store.models.WebhookOutboxRow`)."""

    id: int
    receiver: str
    event_key: str
    event: str
    body: str
    created_ns: int
    state: OutboxState
    attempts: int
    next_attempt_ns: int
    last_error: str
    done_ns: int | None


class ClaimLostError(Exception):
    """Another sender claimed some of the rows first; the claim is rolled back."""


def enqueue(conn: Connection, entries: Sequence[OutboxEntry], *, now_ns: int) -> int:
    """Store ``entries`` as pending rows due at ``now_ns``; returns how many were new."""
    rows = [{"receiver": e.receiver, "event_key": e.event_key, "event": e.event,
             "body": e.body, "created_ns": now_ns, "state": OutboxState.PENDING.value,
             "attempts": 0, "next_attempt_ns": now_ns, "last_error": "", "done_ns": None}
            for e in entries]
    return insert_rows(conn, WEBHOOK_OUTBOX, rows, key=OUTBOX_KEY)


def claim(conn: Connection, *, receiver: str, now_ns: int, lease_ns: int,
          limit: int) -> list[OutboxRow]:
    """Up to ``limit`` of ``receiver``'s oldest pending rows, if they are due at
    ``now_ns``, in order, each due until ``now_ns + lease_ns`` for other senders.

    Only the run of due rows at the head of the queue is handed out: none if
    the oldest pending row is not due. ClaimLostError if another sender
    claimed one of them between the read and the write.
    """
    if conn.dialect.name == "sqlite":
        conn.execute(update(WEBHOOK_OUTBOX).where(WebhookOutboxRow.id == -1)
                     .values(attempts=WebhookOutboxRow.attempts))  # the write lock, first
    stmt = select(WEBHOOK_OUTBOX).where(
        WebhookOutboxRow.receiver == receiver,
        WebhookOutboxRow.state == OutboxState.PENDING.value,
    ).order_by(WebhookOutboxRow.id).limit(limit)
    if conn.dialect.name == "postgresql":
        stmt = stmt.with_for_update()
    head = list(takewhile(lambda r: r.next_attempt_ns <= now_ns, conn.execute(stmt).all()))
    if not head:
        return []
    ids = [r.id for r in head]
    claimed = conn.execute(update(WEBHOOK_OUTBOX).where(
        WebhookOutboxRow.id.in_(ids), WebhookOutboxRow.state == OutboxState.PENDING.value,
        WebhookOutboxRow.next_attempt_ns <= now_ns,
    ).values(next_attempt_ns=now_ns + lease_ns)).rowcount
    if claimed != len(ids):
        raise ClaimLostError(f"receiver {receiver!r}: {len(ids) - claimed} of {len(ids)} due "
                             f"rows were claimed by another sender")
    return [_record(r) for r in head]


def mark_delivered(conn: Connection, row_id: int, *, now_ns: int) -> bool:
    """Row ``row_id`` was accepted at ``now_ns`` (one more attempt); False if it was
    not pending."""
    return _settle(conn, row_id, state=OutboxState.DELIVERED, done_ns=now_ns, error="")


def reschedule(conn: Connection, row_id: int, *, next_attempt_ns: int, error: str) -> bool:
    """An attempt at row ``row_id`` failed with ``error``: count it and make the row due
    again at ``next_attempt_ns``; False if it was not pending."""
    stmt = _pending(row_id).values(attempts=WebhookOutboxRow.attempts + 1,
                                   next_attempt_ns=next_attempt_ns,
                                   last_error=error[:MAX_ERROR_CHARS])
    return bool(conn.execute(stmt).rowcount == 1)


def mark_dead(conn: Connection, row_id: int, *, now_ns: int, error: str) -> bool:
    """An attempt at row ``row_id`` failed with ``error`` and the row is given up at
    ``now_ns``; False if it was not pending."""
    return _settle(conn, row_id, state=OutboxState.DEAD, done_ns=now_ns, error=error)


def release(conn: Connection, row_ids: Sequence[int], *, now_ns: int) -> int:
    """Claimed rows that were not tried are due again at ``now_ns``; returns how many."""
    if not row_ids:
        return 0
    stmt = update(WEBHOOK_OUTBOX).where(
        WebhookOutboxRow.id.in_(list(row_ids)),
        WebhookOutboxRow.state == OutboxState.PENDING.value,
        WebhookOutboxRow.next_attempt_ns > now_ns,
    ).values(next_attempt_ns=now_ns)
    return int(conn.execute(stmt).rowcount)


def pending_counts(conn: Connection) -> dict[str, int]:
    """Receiver -> rows pending (only receivers with some)."""
    stmt = select(WebhookOutboxRow.receiver, func.count()).where(
        WebhookOutboxRow.state == OutboxState.PENDING.value).group_by(WebhookOutboxRow.receiver)
    return {receiver: int(n) for receiver, n in conn.execute(stmt).all()}


def rows(conn: Connection, *, receiver: str | None, state: OutboxState | None,
         limit: int) -> list[OutboxRow]:
    """The first ``limit`` rows (of ``receiver`` / in ``state`` if given), oldest first."""
    stmt = select(WEBHOOK_OUTBOX)
    if receiver is not None:
        stmt = stmt.where(WebhookOutboxRow.receiver == receiver)
    if state is not None:
        stmt = stmt.where(WebhookOutboxRow.state == OutboxState(state).value)
    return [_record(r) for r in conn.execute(stmt.order_by(WebhookOutboxRow.id).limit(limit))]


def prune(conn: Connection, *, before_ns: int) -> int:
    """Delete rows delivered before ``before_ns``; returns how many."""
    stmt = delete(WEBHOOK_OUTBOX).where(WebhookOutboxRow.state == OutboxState.DELIVERED.value,
                                        WebhookOutboxRow.done_ns < before_ns)
    return int(conn.execute(stmt).rowcount)


def _pending(row_id: int) -> Update:
    return update(WEBHOOK_OUTBOX).where(WebhookOutboxRow.id == row_id,
                                        WebhookOutboxRow.state == OutboxState.PENDING.value)


def _settle(conn: Connection, row_id: int, *, state: OutboxState, done_ns: int,
            error: str) -> bool:
    stmt = _pending(row_id).values(state=state.value, attempts=WebhookOutboxRow.attempts + 1,
                                   done_ns=done_ns, last_error=error[:MAX_ERROR_CHARS])
    return bool(conn.execute(stmt).rowcount == 1)


def _record(row: Row[Any]) -> OutboxRow:
    return OutboxRow(id=row.id, receiver=row.receiver, event_key=row.event_key,
                     event=row.event, body=row.body, created_ns=row.created_ns,
                     state=OutboxState(row.state), attempts=row.attempts,
                     next_attempt_ns=row.next_attempt_ns, last_error=row.last_error,
                     done_ns=row.done_ns)
