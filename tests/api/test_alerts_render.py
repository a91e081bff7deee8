"""Alerts without a receiver: what each receiver is sent, records that do not decode,
Alertmanager's fingerprints, and the alerts config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from fabricops.api.alert_payloads import fingerprint, label_set, rfc3339
from fabricops.api.alert_render import AlertRenderer
from fabricops.api.alerts import (
    AlertDispatcher,
    AlertsConfig,
    AlertsConfigError,
    load_alerts_config,
)
from fabricops.core.actions import ActionState
from fabricops.core.bus import Message, Topic, topic_name
from fabricops.core.membus import MemoryBus
from fabricops.store import Store, StoreConfig
from tests.api.alert_records import LINK, action, diagnosis, fast, hook, sample


def test_a_revision_that_moves_the_root_resolves_the_old_alert_and_a_late_one_is_dropped(
        db_url: str) -> None:
    store = Store(StoreConfig(url=db_url))
    store.start()
    config = fast(hook("am", "http://am/", format="alertmanager"), hook("ops", "http://ops/"))
    renderer = AlertRenderer(config, store)
    first, moved = diagnosis(t_s=0), diagnosis(t_s=10, root="spine-1", fault_type="switch_down")
    try:
        renderer.entries(first)
        am, ops = renderer.entries(moved)
        late = renderer.entries(first)
    finally:
        store.stop()
    body = json.loads(am.body)
    assert body["status"] == "firing"
    assert [(a["status"], a["labels"]["root"], a["labels"]["severity"])
            for a in body["alerts"]] == [("firing", "spine-1", "critical"),
                                         ("resolved", LINK, "warning")]
    assert body["alerts"][1]["endsAt"] == rfc3339(moved.ts_ns)
    assert body["commonLabels"] == {"alertname": "FabricFault", "incident": "inc-1"}
    assert json.loads(ops.body)["data"]["root"] == "spine-1"
    assert [e.receiver for e in late] == ["ops"]


def test_receivers_get_only_the_records_they_ask_for(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url))
    store.start()
    config = fast(hook("sure", "http://a/", min_confidence=0.8, events=["diagnoses"]),
                  hook("all", "http://b/"))
    renderer = AlertRenderer(config, store)
    try:
        got = {name: [e.receiver for e in renderer.entries(r)] for name, r in (
            ("unsure", diagnosis(confidence=0.5)), ("sure", diagnosis(t_s=1)),
            ("action", action(ActionState.PROPOSED)))}
    finally:
        store.stop()
    assert got == {"unsure": ["all"], "sure": ["sure", "all"], "action": ["all"]}


def test_a_record_that_does_not_decode_is_set_aside_and_counted(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url))
    store.start()
    registry = CollectorRegistry()
    dispatcher = AlertDispatcher(fast(hook("ops", "http://ops/")), MemoryBus(), store, registry)
    topic = topic_name(Topic.DIAGNOSES)
    try:
        added = dispatcher.process([Message(topic, 0, 0, b"k", b'{"id": 7}', 0),
                                    Message(topic, 0, 1, b"k", diagnosis().encode(), 0)])
        assert store.pending_alerts() == {"ops": 1}
    finally:
        store.stop()
    assert added == 1
    assert sample(registry, "fabricops_alerts_rejected_total") == 1


def test_fingerprints_and_group_keys_are_computed_as_alertmanager_does() -> None:
    # Expected values from prometheus/common model/signature_test.go.
    assert fingerprint({"name": "garland, briggs", "fear": "love is not enough"}) == \
        f"{5799056148416392346:016x}"
    assert fingerprint({"first-label": "first-label-value",
                        "second-label": "second-label-value",
                        "third-label": "third-label-value"}) == f"{13843036195897128121:016x}"
    assert label_set({"job": "node", "alertname": 'say "hi"'}) == \
        '{alertname="say \\"hi\\"", job="node"}'


def test_the_config_is_strict_and_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="receiver names must be unique; repeated: ops"):
        fast(hook("ops", "http://a/"), hook("ops", "http://b/"))
    with pytest.raises(ValueError, match="'ftp://a/' must start with http"):
        hook("ops", "ftp://a/")
    with pytest.raises(ValueError, match="name"):
        hook("ops team", "http://a/")
    with pytest.raises(ValueError, match=r"lease_s 10 is shorter than a batch can take "
                                         r"\(batch_rows 20 x timeout_s 5\)"):
        fast(hook("ops", "http://a/"), lease_s=10)
    with pytest.raises(ValueError, match="extra"):
        AlertsConfig.model_validate({"receivers": [], "retries": 3})


def test_an_alerts_file_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    path = tmp_path / "alerts.yaml"
    path.write_text("receivers:\n"
                    "  - {name: noc, url: 'https://noc.example/hook', format: alertmanager,\n"
                    "     events: [diagnoses], min_confidence: 0.7}\n"
                    "max_backoff_s: 30\n", encoding="utf-8")
    config = load_alerts_config(path)
    (noc,) = config.receivers
    assert (noc.name, noc.format.value, sorted(noc.events), noc.min_confidence) == (
        "noc", "alertmanager", ["diagnoses"], 0.7)
    assert (config.max_backoff_s, config.backoff_s, config.give_up_after_s) == (30, 1, 86_400)
    path.write_text("receivers:\n  - {name: noc}\n", encoding="utf-8")
    where = re.escape(str(path))
    with pytest.raises(AlertsConfigError, match=rf"^{where}: receivers\.0\.url: Field required"):
        load_alerts_config(path)
