"""``fabricops tail``: print what travels on a Kafka topic, readably."""

from __future__ import annotations

import json
import os
import time
from typing import Annotated

import typer

from fabricops.cli.common import fail, user_errors
from fabricops.core.bus import BusError, Consumer, Topic, topic_name
from fabricops.core.bus_factory import BusConfig, make_bus
from fabricops.core.views import view


def tail(
    topic: Annotated[str, typer.Argument(
        help="Topic: telemetry.v2, int.v2, events.v2, diagnoses.v2, actions.v2, control.v2, "
                  "deadletter.v2")],
    bootstrap: Annotated[str, typer.Option(
        "--bootstrap", "-b", envvar="FABRICOPS_BUS__BOOTSTRAP_SERVERS",
        help="Kafka bootstrap servers, host:port[,...]")] = "127.0.0.1:9092",
    prefix: Annotated[str, typer.Option(help="Topic prefix")] = "fabricops.",
    count: Annotated[int, typer.Option("--count", "-n", min=0,
                                       help="Stop after this many records (0: never)")] = 0,
    seconds: Annotated[float, typer.Option(min=0, help="Stop after this long (0: never)")] = 0,
    compact: Annotated[bool, typer.Option(help="One JSON object per line")] = False,
) -> None:
    """Print the records on TOPIC as JSON, decoded by the topic's schema.

    Joins a consumer group of its own (it never takes records from the
    platform's workers). Frames print with metric names, INT batches as one
    record per report. A record that cannot be decoded is shown with the reason.

        fabricops tail telemetry.v2 -b 127.0.0.1:9092 -n 5
    """
    if topic not in {t.value for t in Topic}:
        raise fail(f"unknown topic {topic!r}; known: {', '.join(t.value for t in Topic)}")
    config = BusConfig(kind="kafka", bootstrap_servers=bootstrap, topic_prefix=prefix)
    bus = make_bus(config)
    with user_errors():
        try:
            bus.start()
            consumer = bus.subscribe([topic_name(Topic(topic), prefix)],
                                     group=f"fabricops-tail-{os.getpid()}-{time.time_ns()}")
            _print(consumer, prefix, count, seconds, compact)
        except BusError as exc:
            raise fail(str(exc)) from None
        finally:
            bus.stop()


def _print(consumer: Consumer, prefix: str, count: int, seconds: float, compact: bool) -> None:
    shown, deadline = 0, (time.monotonic() + seconds) if seconds else None
    while deadline is None or time.monotonic() < deadline:
        for msg in consumer.poll(timeout_s=0.5):
            for record in view(msg, prefix):
                typer.echo(json.dumps(record) if compact else json.dumps(record, indent=2))
                shown += 1
                if count and shown >= count:
                    return
