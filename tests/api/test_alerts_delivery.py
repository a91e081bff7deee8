"""Alert webhooks: the outbox between the bus and real local HTTP receivers.

Records go on a MemoryBus; the dispatcher stores its outbox in a SQLite file;
receivers are local HTTP servers (tests.remediation.http_receiver) that can
be stopped and started again on the same port.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from fabricops.api.alert_payloads import NO_END, fingerprint, rfc3339
from fabricops.api.alert_render import event_key
from fabricops.api.alert_sender import delivery_id
from fabricops.api.alerts import AlertDispatcher, AlertsConfig
from fabricops.core.actions import Action, ActionState
from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.membus import MemoryBus
from fabricops.core.records import Diagnosis
from fabricops.store import Store, StoreConfig
from fabricops.store.outbox import OutboxState
from tests.api.alert_records import LINK, SECRET, action, diagnosis, fast, hook, sample
from tests.remediation.http_receiver import Answer, Receiver

GROUP = "fabricops-alerts"
AM_TOP_FIELDS = {"version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels",
                 "commonLabels", "commonAnnotations", "externalURL", "alerts"}
AM_ALERT_FIELDS = {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL",
                   "fingerprint"}


def publish(bus: MemoryBus, *records: Diagnosis | Action) -> None:
    for r in records:
        if isinstance(r, Diagnosis):
            bus.publish(topic_name(Topic.DIAGNOSES), r.root.encode(), [r.encode()])
        else:
            bus.publish(topic_name(Topic.ACTIONS), r.id.encode(), [r.encode()])


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bodies(receiver: Receiver) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in receiver.requests]


@pytest.fixture
def bus() -> Iterator[MemoryBus]:
    started = MemoryBus()
    started.start()
    yield started
    started.stop()


@pytest.fixture
def receivers() -> Iterator[Callable[..., Receiver]]:
    """``receivers(started=True)``: a local receiver, stopped after the test."""
    made: list[Receiver] = []

    def make(started: bool = True) -> Receiver:
        receiver = Receiver(port=0 if started else free_port())
        if started:
            receiver.start()
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.stop()


@contextmanager
def dispatching(config: AlertsConfig, bus: MemoryBus, url: str,
                registry: CollectorRegistry | None = None) -> Iterator[AlertDispatcher]:
    store = Store(StoreConfig(url=url))
    store.start()
    dispatcher = AlertDispatcher(config, bus, store, registry)
    dispatcher.start()
    try:
        yield dispatcher
    finally:
        dispatcher.stop()
        store.stop()


@pytest.mark.integration
def test_alerts_are_signed_and_carry_a_delivery_id_per_record(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers()
    d, a = diagnosis(), action(ActionState.PROPOSED)
    with dispatching(fast(hook("ops", ops.url)), bus, db_url):
        publish(bus, d)
        wait_for(lambda: len(ops.requests) == 1, what="the diagnosis")
        publish(bus, a)
        wait_for(lambda: len(ops.requests) == 2, what="the action")
    for request, record, event in zip(ops.requests, (d, a), ("diagnosis", "action"),
                                      strict=True):
        signed = hmac.new(SECRET.encode(), request.body, hashlib.sha256).hexdigest()
        assert request.headers["X-Fabricops-Signature"] == f"sha256={signed}"
        assert request.headers["X-Fabricops-Event"] == f"alert.{event}"
        assert request.headers["X-Fabricops-Delivery"] == delivery_id("ops", event_key(record))
        assert json.loads(request.body) == {"event": event, "id": record.id,
                                            "ts": rfc3339(record.ts_ns),
                                            "data": record.model_dump(mode="json")}
    assert bodies(ops)[0]["ts"] == "2026-01-01T00:00:00.000000Z"
    assert Diagnosis.model_validate(bodies(ops)[0]["data"]) == d


@pytest.mark.integration
@pytest.mark.slow
def test_a_receiver_down_for_30_s_gets_every_alert_of_the_outage_once(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers(started=False)
    registry = CollectorRegistry()
    outage = [diagnosis("inc-1", t) for t in range(0, 60, 10)] + [
        action(ActionState.PROPOSED), action(ActionState.APPROVED),
        action(ActionState.APPLIED), action(ActionState.VERIFIED)]
    config = fast(hook("ops", ops.url), backoff_s=0.2, max_backoff_s=1.0)
    with dispatching(config, bus, db_url, registry):
        started = time.monotonic()
        for i, record in enumerate(outage):
            publish(bus, record)
            time.sleep(max(0.0, started + 2.5 * i - time.monotonic()))
        time.sleep(max(0.0, started + 30.0 - time.monotonic()))
        assert sample(registry, "fabricops_alerts_outbox_pending") == len(outage)
        assert sample(registry, "fabricops_alerts_failed_attempts_total", "ops") >= 10
        ops.start()
        wait_for(lambda: len(ops.requests) >= len(outage), what="the outage's alerts")
        time.sleep(1.5)
        wait_for(lambda: sample(registry, "fabricops_alerts_outbox_pending") == 0,
                 what="an empty outbox")
    delivered = [request.headers["X-Fabricops-Delivery"] for request in ops.requests]
    assert sorted(delivered) == sorted(delivery_id("ops", event_key(r)) for r in outage)
    diagnoses = [b["data"]["ts_ns"] for b in bodies(ops) if b["event"] == "diagnosis"]
    assert diagnoses == [d.ts_ns for d in outage if isinstance(d, Diagnosis)]
    assert sample(registry, "fabricops_alerts_delivered_total", "ops") == len(outage)
    assert sample(registry, "fabricops_alerts_dead_total", "ops") == 0


@pytest.mark.integration
def test_a_dispatcher_restarted_during_an_outage_delivers_everything_once(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers(started=False)
    first, later = [diagnosis("inc-1", t) for t in (0, 10, 20)], [diagnosis("inc-2", 30),
                                                                  action(ActionState.PROPOSED)]
    registry = CollectorRegistry()
    with dispatching(fast(hook("ops", ops.url)), bus, db_url, registry) as dispatcher:
        publish(bus, *first)
        wait_for(lambda: dispatcher.store.pending_alerts() == {"ops": 3}, what="3 rows")
        wait_for(lambda: sample(registry, "fabricops_alerts_failed_attempts_total", "ops") > 2,
                 what="failed attempts")
    assert sum(bus.committed(GROUP, topic_name(Topic.DIAGNOSES)).values()) == 3
    publish(bus, *later)
    ops.start()
    with dispatching(fast(hook("ops", ops.url)), bus, db_url):
        wait_for(lambda: len(ops.requests) == 5, what="5 alerts")
        time.sleep(0.5)
    assert sorted(r.headers["X-Fabricops-Delivery"] for r in ops.requests) == sorted(
        delivery_id("ops", event_key(r)) for r in first + later)


@pytest.mark.integration
def test_a_record_the_bus_delivers_again_is_sent_once(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers()
    d = diagnosis()
    registry = CollectorRegistry()
    with dispatching(fast(hook("ops", ops.url)), bus, db_url, registry) as dispatcher:
        publish(bus, d, d)
        wait_for(lambda: len(ops.requests) == 1, what="the diagnosis")
        again = Message(topic_name(Topic.DIAGNOSES), 0, 0, d.root.encode(), d.encode(), 0)
        assert dispatcher.process([again]) == 0
        time.sleep(0.5)
    assert len(ops.requests) == 1
    assert sample(registry, "fabricops_alerts_enqueued_total") == 1


@pytest.mark.integration
def test_offsets_are_committed_only_once_the_alerts_are_stored(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers()
    topic = topic_name(Topic.DIAGNOSES)
    with dispatching(fast(hook("ops", ops.url)), bus, db_url) as dispatcher:
        dispatcher.store.stop()
        publish(bus, diagnosis())
        time.sleep(1.0)
        assert sum(bus.committed(GROUP, topic).values()) == 0
        assert ops.requests == []
        dispatcher.store.start()
        wait_for(lambda: len(ops.requests) == 1, timeout_s=15, what="the diagnosis")
        wait_for(lambda: sum(bus.committed(GROUP, topic).values()) == 1, what="the commit")


@pytest.mark.integration
def test_a_receiver_that_is_down_or_hangs_does_not_delay_another(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    hanging, down, ops = receivers(), receivers(started=False), receivers()
    hanging.default = Answer(delay_s=6.0)
    config = fast(hook("hanging", hanging.url, timeout_s=5.0), hook("down", down.url),
                  hook("ops", ops.url))
    records = [diagnosis("inc-1", 0), diagnosis("inc-2", 1), diagnosis("inc-3", 2)]
    registry = CollectorRegistry()
    with dispatching(config, bus, db_url, registry):
        publish(bus, records[0])
        wait_for(lambda: len(hanging.requests) == 1, what="a POST hanging")
        publish(bus, *records[1:])
        wait_for(lambda: len(ops.requests) == 3, what="the healthy receiver's alerts")
        # published after the hanging POST began, delivered before it timed out
        assert sample(registry, "fabricops_alerts_failed_attempts_total", "hanging") == 0
        assert len(hanging.requests) == 1


@pytest.mark.integration
def test_alertmanager_receivers_see_a_diagnosis_fire_and_its_verified_action_resolve(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    am = receivers()
    config = fast(hook("am", am.url, format="alertmanager"), external_url="http://fo:8080",
                  generator_url="http://fo:8080/api/v1/diagnoses?root={root}")
    d = diagnosis()
    with dispatching(config, bus, db_url):
        publish(bus, d, action(ActionState.PROPOSED), action(ActionState.APPLIED))
        wait_for(lambda: len(am.requests) == 1, what="the firing alert")
        verified = action(ActionState.VERIFIED)
        publish(bus, verified)
        wait_for(lambda: len(am.requests) == 2, what="the resolved alert")
        time.sleep(0.3)
    fired, resolved = bodies(am)
    labels = {"alertname": "FabricFault", "incident": "inc-1", "fault_type": "gray_loss",
              "root": LINK, "severity": "warning"}
    annotations = {"summary": f"gray_loss at link {LINK}",
                   "description": "confidence 0.90; jobs job-42; 2 hosts affected. "
                                  "Recommended: drain the link"}
    assert set(fired) == set(resolved) == AM_TOP_FIELDS
    assert fired["version"] == "4"
    assert fired["groupKey"] == resolved["groupKey"] == \
        '{}:{alertname="FabricFault", incident="inc-1"}'
    assert fired["truncatedAlerts"] == 0
    assert (fired["status"], resolved["status"]) == ("firing", "resolved")
    assert fired["receiver"] == "am"
    assert fired["groupLabels"] == {"alertname": "FabricFault", "incident": "inc-1"}
    assert fired["commonLabels"] == resolved["commonLabels"] == labels
    assert fired["commonAnnotations"] == annotations
    assert fired["externalURL"] == "http://fo:8080"
    (alert,) = fired["alerts"]
    (cleared,) = resolved["alerts"]
    assert set(alert) == set(cleared) == AM_ALERT_FIELDS
    assert (alert["status"], cleared["status"]) == ("firing", "resolved")
    assert alert["labels"] == cleared["labels"] == labels
    assert alert["annotations"] == annotations
    assert cleared["annotations"] == {**annotations, "resolved_by": (
        f"drain_link {LINK} (act-inc-1), verified at {rfc3339(verified.ts_ns)}")}
    assert alert["startsAt"] == cleared["startsAt"] == "2025-12-31T23:59:55.000000Z"
    assert (alert["endsAt"], cleared["endsAt"]) == (NO_END, rfc3339(verified.ts_ns))
    assert alert["generatorURL"] == \
        "http://fo:8080/api/v1/diagnoses?root=leaf-0%3Aeth1~spine-1%3Aeth3"
    assert alert["fingerprint"] == cleared["fingerprint"] == fingerprint(labels)


@pytest.mark.integration
def test_a_refused_alert_is_given_up_with_its_cause_counted_and_not_retried(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver],
        caplog: pytest.LogCaptureFixture) -> None:
    ops = receivers()
    ops.script = [Answer(status=400, body=b"unknown incident schema")]
    registry = CollectorRegistry()
    refused, accepted = diagnosis("inc-1"), diagnosis("inc-2", 1)
    with caplog.at_level(logging.ERROR, logger="fabricops.api.alert_sender"), \
            dispatching(fast(hook("ops", ops.url)), bus, db_url, registry) as dispatcher:
        publish(bus, refused)
        wait_for(lambda: len(ops.requests) == 1, what="the refused alert")
        publish(bus, accepted)
        wait_for(lambda: len(ops.requests) == 2, what="the next alert")
        time.sleep(0.5)
        (dead,) = dispatcher.store.alerts(state=OutboxState.DEAD)
    assert len(ops.requests) == 2
    assert dead.event_key == event_key(refused)
    assert dead.attempts == 1
    assert dead.last_error == (f"refused on attempt 1: webhook {ops.url}: HTTP 400 Bad "
                               f"Request: unknown incident schema (attempt 1 of 1; not retried)")
    assert sample(registry, "fabricops_alerts_dead_total", "ops") == 1
    assert sample(registry, "fabricops_alerts_failed_attempts_total", "ops") == 1
    assert sample(registry, "fabricops_alerts_delivered_total", "ops") == 1
    assert f"{event_key(refused)} to receiver ops given up" in caplog.text


@pytest.mark.integration
def test_an_alert_failing_past_give_up_after_s_is_marked_dead(
        bus: MemoryBus, db_url: str, receivers: Callable[..., Receiver]) -> None:
    ops = receivers()
    ops.default = Answer(status=503, body=b"maintenance")
    registry = CollectorRegistry()
    config = fast(hook("ops", ops.url), give_up_after_s=0.5)
    with dispatching(config, bus, db_url, registry) as dispatcher:
        publish(bus, diagnosis())
        wait_for(lambda: sample(registry, "fabricops_alerts_dead_total", "ops") == 1,
                 what="the row to be given up")
        (dead,) = dispatcher.store.alerts(state=OutboxState.DEAD)
        assert dispatcher.store.pending_alerts() == {}
    assert dead.attempts == len(ops.requests) > 2
    assert dead.last_error.startswith("still failing ")
    assert dead.last_error.endswith(f"webhook {ops.url}: gave up after 1 attempt; last: "
                                    f"HTTP 503 Service Unavailable: maintenance")
