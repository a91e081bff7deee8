"""``fabricops tail`` reads a real Kafka-protocol broker and prints records readably."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.core.bus import Topic, topic_name
from fabricops.core.bus_factory import BusConfig, make_bus
from fabricops.core.busio import BusFrameSink
from fabricops.core.frame import Frame, Source

pytestmark = pytest.mark.integration


def _frame(device: str, seq: int) -> Frame:
    return Frame.build(device, 1_767_225_600_000_000_000 + seq, Source.SIM, seq,
                       [f"{device}:eth1", f"{device}:eth1"], ["in_octets", "rx_power_dbm"],
                       [np.uint64(2**63 + seq), -3.5])


def test_tail_prints_frames_and_flags_undecodable_records(kafka_broker: str) -> None:
    bus = make_bus(BusConfig(kind="kafka", bootstrap_servers=kafka_broker))
    bus.start()
    try:
        BusFrameSink(bus).publish_frames([_frame("leaf-0", 1), _frame("leaf-1", 2)])
        bus.publish(topic_name(Topic.TELEMETRY), b"junk", [b"not a frame"])
        assert bus.flush(10.0)
    finally:
        bus.stop()
    result = CliRunner().invoke(app, ["tail", Topic.TELEMETRY.value, "-b", kafka_broker,
                                      "-n", "3", "--seconds", "30", "--compact"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    frames = sorted((r for r in records if "samples" in r), key=lambda r: r["device"])
    assert [f["device"] for f in frames] == ["leaf-0", "leaf-1"]
    assert frames[0]["samples"][0] == {"entity": "leaf-0:eth1", "metric": "in_octets",
                                       "value": 2**63 + 1}
    assert frames[0]["samples"][1]["value"] == -3.5
    junk = [r for r in records if "undecodable" in r]
    assert junk
    assert junk[0]["key"] == "junk"


def test_tail_refuses_an_unknown_topic() -> None:
    result = CliRunner().invoke(app, ["tail", "telemetry.v9"])
    assert result.exit_code == 2
    assert "unknown topic 'telemetry.v9'" in result.stderr
