"""A consumer-group member in a process of its own, for tests that kill it with -9.

``python -m tests.integration.group_member BOOTSTRAP TOPIC GROUP`` runs a
``ConsumerLoop`` (the same one every fabricops worker runs) and prints a line
``owns 0,1,2`` each time its partitions change, until it is killed.
"""

from __future__ import annotations

import sys
import threading

from prometheus_client import CollectorRegistry

from fabricops.core.consumer import ConsumerLoop, ConsumerLoopConfig
from fabricops.core.kafkabus import KafkaBus
from tests.integration.conftest import bus_config


def main(bootstrap: str, topic: str, group: str) -> None:
    bus = KafkaBus(bus_config(bootstrap), CollectorRegistry())
    bus.start()

    def assigned(owned: set[tuple[str, int]]) -> None:
        print("owns", ",".join(str(p) for _, p in sorted(owned)), flush=True)

    loop = ConsumerLoop(ConsumerLoopConfig(), bus, [topic], group, lambda _: None,
                        name="member", assigned=assigned)
    loop.run(threading.Event())


if __name__ == "__main__":
    main(*sys.argv[1:4])
