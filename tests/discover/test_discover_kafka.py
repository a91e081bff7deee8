"""``fabricops discover --against --bootstrap`` puts each difference on the events topic
of a real Kafka-protocol broker (Tansu), as the pipeline's own events are."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from fabricops.cli.discover import EXIT_DIFFERENT
from fabricops.cli.main import app
from fabricops.core.bus import Topic, topic_name
from fabricops.core.kafkabus import KafkaBus
from fabricops.core.records import Event
from fabricops.core.topology import save_topology
from fabricops.simulator.builders import fat_tree
from fabricops.simulator.faults import MiswireSpec
from tests.discover.fabric import serving
from tests.integration.conftest import TansuBroker, bus_config, free_port, tansu_program

pytestmark = pytest.mark.integration


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    running = TansuBroker(tansu_program(), free_port(), tmp_path / "tansu.log")
    running.start()
    yield running.bootstrap
    running.stop()


def test_each_difference_is_an_event_on_the_bus(broker: str, tmp_path: Path) -> None:
    built = fat_tree(k=4)
    plan = save_topology(built, tmp_path / "plan.yaml")
    swap = (built.links[20].id, built.links[30].id)
    with serving(built) as fabric:
        fabric.cabling.miswire(MiswireSpec(links=swap))
        doc = fabric.inventory().model_dump(mode="json", exclude_none=True)
        (tmp_path / "inv.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        result = CliRunner().invoke(app, [
            "discover", "-i", str(tmp_path / "inv.yaml"), "-o", str(tmp_path / "now.yaml"),
            "--against", str(plan), "--bootstrap", broker])
    assert result.exit_code == EXIT_DIFFERENT, result.output
    reader = KafkaBus(bus_config(broker), CollectorRegistry())
    member = reader.subscribe([topic_name(Topic.EVENTS)], "audit")
    events: list[Event] = []
    deadline = time.monotonic() + 30
    while len(events) < 2 and time.monotonic() < deadline:
        events += [Event.decode(m.value) for m in member.poll(timeout_s=0.5)]
    member.close()
    assert sorted(e.entity for e in events) == sorted(swap)
    assert all(e.metric == "lldp_neighbor" and "miswired" in e.detail for e in events)
