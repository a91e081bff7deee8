"""The store's operations tables: RCA diagnoses, remediation actions, the webhook
outbox (see :class:`~fabricops.store.store.Store`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, Row, Select

from fabricops.core.actions import Action, ActionState
from fabricops.core.records import Diagnosis
from fabricops.store import actions as action_tables
from fabricops.store import outbox as outbox_tables
from fabricops.store import queries
from fabricops.store.base import ActionConflict, ActionNotFound, StoreBase, StoreError
from fabricops.store.models import (
    ActionLogRow,
    ActionRow,
    DiagnosisRow,
    WebhookOutboxRow,
)
from fabricops.store.outbox import OutboxEntry, OutboxRow, OutboxState

_log = logging.getLogger(__name__)
DIAGNOSIS_KEY = ("diagnosis_id", "ts_ns")


class OperationsStore(StoreBase):
    """Diagnoses, actions and alerts, on the engine of ``StoreBase``."""

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
