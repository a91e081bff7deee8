"""RemediationService: remediation as a member of the ``fabricops-remediation`` group.

It consumes ``diagnoses.v2`` (what to remedy) and the telemetry the RCA sees
(``telemetry.v2``, ``int.v2``: for the pre-check's loads and for
verification), and steps its engine once per ``step_s`` of telemetry time.
Every state change of an action is written to the store (the audit log;
optimistic concurrency against operators' approvals through the CLI or API),
published on ``actions.v2`` (key = action id) and sent to the webhook, if
one is configured. Approvals, rejections and rollback requests are read from
the store at every step.
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricops.core.actions import Action, ActionState
from fabricops.core.bus import DEFAULT_PREFIX, Bus, Message, Topic, record_headers, topic_name
from fabricops.core.busio import GroupConsumer, frames_from_messages
from fabricops.core.deadletter import DeadLetterBox
from fabricops.core.intreport import IntBatch, IntBatchError
from fabricops.core.liveness import Liveness
from fabricops.core.records import Diagnosis
from fabricops.core.wire_frame import EntityTables
from fabricops.remediation.engine import RemediationEngine
from fabricops.remediation.webhook import WebhookNotifier
from fabricops.store.store import ActionConflict, Store, StoreError

log = logging.getLogger(__name__)


class RemediationServiceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = "fabricops-remediation"
    prefix: str = DEFAULT_PREFIX
    step_s: float = Field(default=1.0, gt=0, description="Telemetry time between steps")


class RemediationService:
    """See the module docstring. ``engine`` is built by the caller (with its actuators)."""

    def __init__(self, config: RemediationServiceConfig, bus: Bus, engine: RemediationEngine,
                 store: Store | None = None, notifier: WebhookNotifier | None = None,
                 registry: CollectorRegistry | None = None,
                 liveness: Liveness | None = None) -> None:
        self.config = config
        self.bus = bus
        self._tables = EntityTables()  # each device's last entity table
        self.engine = engine
        self.store = store
        self.notifier = notifier
        engine.record = self._record
        self._topics = [topic_name(t, config.prefix)
                        for t in (Topic.TELEMETRY, Topic.INT, Topic.DIAGNOSES)]
        self._out = topic_name(Topic.ACTIONS, config.prefix)
        self._last_step_ns = -1
        reg = registry if registry is not None else CollectorRegistry()
        self.dead_letters = DeadLetterBox(bus, config.group, prefix=config.prefix, registry=reg)
        self._consumer = GroupConsumer(bus, self._topics, config.group, self.process,
                                       name="remediation", log=log,
                                       dead_letters=self.dead_letters, liveness=liveness,
                                       registry=reg)
        self.rejected = 0

    def start(self) -> None:
        """Take up the actions in effect from the store, then consume."""
        if self.store is not None:
            live = [a for state in (ActionState.APPLIED, ActionState.VERIFIED,
                                    ActionState.APPROVED, ActionState.PROPOSED)
                    for a in self.store.actions(state=state, limit=1000)]
            self.engine.resume(live)
        self._consumer.start()

    def stop(self) -> None:
        self._consumer.stop()

    def process(self, messages: list[Message]) -> None:
        """Fold a batch in; step the engine when ``step_s`` of telemetry time has passed."""
        tel, int_topic, dx_topic = self._topics
        watch = self.engine.watch
        rejects: list[tuple[Message, str]] = []
        watch.ingest_frames(frames_from_messages((m for m in messages if m.topic == tel),
                                                 rejects=rejects, tables=self._tables))
        diagnoses = []
        for m in messages:
            try:
                if m.topic == int_topic:
                    watch.ingest_int(IntBatch.decode(m.value))
                elif m.topic == dx_topic:
                    diagnoses.append(Diagnosis.decode(m.value))
            except (IntBatchError, ValidationError, ValueError) as exc:
                rejects.append((m, str(exc)))
        for m, why in rejects:
            self.rejected += 1
            self.dead_letters.put(m, "undecodable", why)
        newest = watch.engine.view.newest_ns
        if newest >= 0 and newest - self._last_step_ns >= self.config.step_s * 1e9:
            self._last_step_ns = newest
            watch.step()
            self.engine.tick(newest, self._pending())
        now = max(newest, 0)
        for d in diagnoses:
            self.engine.on_diagnosis(d, max(now, d.ts_ns))

    def _pending(self) -> list[Action]:
        if self.store is None:
            return []
        try:
            return self.store.pending_actions()
        except StoreError as exc:
            log.error("remediation: cannot read pending actions: %s", exc)
            return []

    def _record(self, new: Action, prior: Action | None) -> Action:
        stored = new
        if self.store is not None:
            try:
                stored = self.store.put_action(new, prior=prior)
            except ActionConflict as exc:
                log.warning("remediation: %s; taking the stored record", exc)
                stored = self.store.action(new.id) or new
            except StoreError as exc:
                log.error("remediation: could not store action %s: %s", new.id, exc)
        self.bus.publish(self._out, stored.id.encode(), [stored.encode()],
                         record_headers(Topic.ACTIONS, "remediation"))
        if self.notifier is not None:
            self.notifier.notify(stored)
        return stored
