"""Without a terminal, ``up`` and ``collect`` print one status line per interval;
counts read as English."""

from __future__ import annotations

import io
import threading

from prometheus_client import CollectorRegistry
from rich.console import Console

from fabricops.cli.lifecycle import Running
from fabricops.cli.up_status import watch
from fabricops.collectors.collection import CollectionStatus
from fabricops.core.wording import counted


class _Collection:
    """Collectors whose published frames grow by 10 every time they are asked."""

    def __init__(self) -> None:
        self.frames = 0

    def status(self) -> CollectionStatus:
        self.frames += 10
        return CollectionStatus(targets_up={"snmp": (2, 3)}, frames={"snmp": self.frames},
                                samples={"snmp": self.frames * 4}, int_reports=0, int_hops=0)


def test_without_a_terminal_a_status_line_is_printed_every_interval() -> None:
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    running = Running(CollectorRegistry())
    stopper = threading.Timer(3.4, running.stop_requested.set)
    stopper.start()
    try:
        watch(running, _Collection(), None, 0, console, every_s=1.0)  # type: ignore[arg-type]
    finally:
        stopper.cancel()
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert 2 <= len(lines) <= 4, lines
    assert all("snmp 2/3 up" in line for line in lines), lines
    frames = [int(line.split("snmp 2/3 up ")[1].split(" frames")[0].replace(",", ""))
              for line in lines]
    assert frames == sorted(frames)
    assert frames[0] < frames[-1], "each line is a fresh status"


def test_counts_take_the_number_of_their_noun() -> None:
    assert counted(1, "diagnosis") == "1 diagnosis"
    assert counted(2, "diagnosis") == "2 diagnoses"
    assert counted(0, "action") == "0 actions"
    assert counted(12_345, "frame") == "12,345 frames"
    assert counted(3, "switch") == "3 switches"
    assert counted(1, "entry") == "1 entry"
    assert counted(5, "entry") == "5 entries"
