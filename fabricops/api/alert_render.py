"""Outbox entries of diagnoses and actions: one per receiver that wants the record.

A receiver wants a record if its ``events`` name the kind and the record's
confidence is at least its ``min_confidence``. Every diagnosis revision and
every action version goes to ``fabricops`` receivers; ``alertmanager``
receivers get a diagnosis revision that is not older than what is known of
its incident (a late revision would fire an alert already moved or
resolved) and the actions that reached ``verified``. The entry's
``event_key`` names the record (``diagnosis:ID@TS_NS``,
``action:ID#AUDIT_LEN:STATE``), so the same record is one row per receiver.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from fabricops.api.alert_config import AlertEvents, AlertFormat, AlertReceiver, AlertsConfig
from fabricops.api.alert_payloads import (
    IncidentAlert,
    action_alert,
    alertmanager_body,
    fabricops_body,
    incident_alert,
    resolved_by,
)
from fabricops.core.actions import Action, ActionState
from fabricops.core.records import Diagnosis
from fabricops.store.outbox import OutboxEntry
from fabricops.store.store import Store

DIAGNOSIS_EVENT: Final = "alert.diagnosis"
ACTION_EVENT: Final = "alert.action"
MAX_NS: Final = 2**63 - 1

Body = dict[str, object]


def event_key(record: Diagnosis | Action) -> str:
    """The name of one diagnosis revision or one action version."""
    if isinstance(record, Diagnosis):
        return f"diagnosis:{record.id}@{record.ts_ns}"
    return f"action:{record.id}#{len(record.audit)}:{record.state.value}"


@dataclass(frozen=True)
class _Incident:
    alert: IncidentAlert  # of the newest revision known
    resolved_ns: int | None = None  # when a verified action resolved it


class IncidentBook:
    """What the Alertmanager format must know of each incident: the alert of its
    newest revision and when a verified action resolved it.

    The ``capacity`` incidents used last are kept in memory; another is read
    from the store's diagnoses (so a restarted dispatcher, or one that did not
    see the diagnosis, still resolves the alert that fired). StoreError passes.
    """

    def __init__(self, store: Store, capacity: int = 4096) -> None:
        self.store = store
        self.capacity = capacity
        self._known: OrderedDict[str, _Incident] = OrderedDict()

    def revise(self, d: Diagnosis) -> tuple[IncidentAlert, IncidentAlert | None] | None:
        """The alert of revision ``d`` and the alert it replaces (when the root or fault
        type changed); None if ``d`` is older than a revision or resolution known."""
        current = incident_alert(d)
        known = self._known.get(d.id)
        if known is None:
            revisions = self._revisions(d.id)
            if revisions and revisions[-1].ts_ns > d.ts_ns:
                self._remember(d.id, _Incident(incident_alert(revisions[-1])))
                return None
            before = [r for r in revisions if r.ts_ns < d.ts_ns]
            known = _Incident(incident_alert(before[-1])) if before else None
        if known is not None and (known.alert.ts_ns > d.ts_ns or (
                known.resolved_ns is not None and known.resolved_ns >= d.ts_ns)):
            return None
        self._remember(d.id, _Incident(current))
        if known is None or known.alert.ts_ns == d.ts_ns or known.alert.labels == current.labels:
            return current, None
        return current, known.alert

    def resolve(self, a: Action) -> IncidentAlert:
        """The alert verified action ``a`` resolves: its incident's newest revision's, or
        one made from the action if no revision is known."""
        known = self._known.get(a.diagnosis_id)
        if known is not None:
            alert = known.alert
        else:
            revisions = self._revisions(a.diagnosis_id)
            alert = incident_alert(revisions[-1]) if revisions else action_alert(a)
        self._remember(a.diagnosis_id, _Incident(alert, resolved_ns=a.ts_ns))
        return alert

    def _revisions(self, incident: str) -> list[Diagnosis]:
        return self.store.diagnoses(t0_ns=0, t1_ns=MAX_NS, diagnosis_id=incident)

    def _remember(self, incident: str, known: _Incident) -> None:
        self._known[incident] = known
        self._known.move_to_end(incident)
        while len(self._known) > self.capacity:
            self._known.popitem(last=False)


class AlertRenderer:
    """Turns records into outbox entries for the configured receivers (one thread)."""

    def __init__(self, config: AlertsConfig, store: Store) -> None:
        self.config = config
        self.incidents = IncidentBook(store)
        self._alertmanager = any(r.format is AlertFormat.ALERTMANAGER for r in config.receivers)

    def entries(self, record: Diagnosis | Action) -> list[OutboxEntry]:
        """One entry per receiver that wants ``record`` (see the module docstring)."""
        is_diagnosis = isinstance(record, Diagnosis)
        kind = AlertEvents.DIAGNOSES if is_diagnosis else AlertEvents.ACTIONS
        event = DIAGNOSIS_EVENT if is_diagnosis else ACTION_EVENT
        for_alertmanager = self._alertmanager_bodies(record) if self._alertmanager else None
        key = event_key(record)
        entries = []
        for receiver in self.config.receivers:
            if kind not in receiver.events or record.confidence < receiver.min_confidence:
                continue
            if receiver.format is AlertFormat.FABRICOPS:
                body: Body | None = fabricops_body(record)
            else:
                body = for_alertmanager(receiver) if for_alertmanager is not None else None
            if body is not None:
                entries.append(OutboxEntry(receiver.name, key, event,
                                           json.dumps(body, separators=(",", ":"))))
        return entries

    def _alertmanager_bodies(self, record: Diagnosis | Action,
                             ) -> Callable[[AlertReceiver], Body] | None:
        """The Alertmanager body of ``record`` by receiver; None if it makes none."""
        cfg = self.config
        if isinstance(record, Diagnosis):
            revised = self.incidents.revise(record)
            if revised is None:
                return None
            firing, replaced = revised
            resolved = [] if replaced is None else [(replaced, record.ts_ns)]
            incident = record.id
        elif record.state is ActionState.VERIFIED:
            firing, incident = None, record.diagnosis_id
            resolved = [(resolved_by(self.incidents.resolve(record), record), record.ts_ns)]
        else:
            return None
        return lambda receiver: alertmanager_body(
            receiver=receiver.name, incident=incident, firing=firing, resolved=resolved,
            external_url=cfg.external_url, generator_url=cfg.generator_url)
