"""``fabricops discover``: the topology document of a real fabric, from LLDP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from fabricops.cli.common import fail, stderr_console, stderr_is_terminal, user_errors
from fabricops.cli.preflight import named
from fabricops.core.bus_factory import BusConfig, make_bus
from fabricops.core.busio import publish_events
from fabricops.core.records import Event
from fabricops.core.topology import load_topology, save_topology
from fabricops.discover.cabling_diff import Difference, diff_cabling, difference_events
from fabricops.discover.inventory import load_discovery_inventory, named_inventory
from fabricops.discover.service import Discovery, DiscoveryConfig, DiscoveryResult
from fabricops.discover.summary import summary_json, summary_lines
from fabricops.store.store import Store, StoreConfig

#: Exit code when the cabling found differs from ``--against``.
EXIT_DIFFERENT = 4

EPILOG = (
    "Inventory targets may leave out 'device': such a switch is named by its sysName "
    "(SNMP) or LLDP system name (gNMI); --inventory-out writes the inventory back with "
    "those names. Exit codes: 0 done (and, with --against, the cabling matches); "
    "1 an unexpected failure; 2 a bad flag or file, or no device answered; "
    f"{EXIT_DIFFERENT} the cabling differs from --against.")


@contextmanager
def _progress(json_out: bool) -> Iterator[Callable[[int, int, str], None]]:
    """A progress bar on stderr while polling (on a terminal, and not with --json)."""
    columns = (TextColumn("polling LLDP"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[device]}"), TimeElapsedColumn())
    with Progress(*columns, console=stderr_console(), transient=True,
                  disable=json_out or not stderr_is_terminal()) as bar:
        task = bar.add_task("poll", total=None, device="")

        def update(done: int, total: int, device: str) -> None:
            bar.update(task, completed=done, total=total, device=device)

        yield update


def _publish(events: list[Event], db: str | None, bootstrap: str | None) -> None:
    """Store the events (``--db``) and put them on the events topic (``--bootstrap``)."""
    if db:
        store = Store(StoreConfig(url=db))
        with named("--db", db):
            store.start()
        try:
            store.put_events(events)
        finally:
            store.stop()
    if bootstrap:
        bus = make_bus(BusConfig(kind="kafka", bootstrap_servers=bootstrap))
        bus.start()
        try:
            publish_events(bus, events, source="discover")
            if not bus.flush(10.0):
                raise OSError(f"--bootstrap {bootstrap}: events not acknowledged in 10 s")
        finally:
            bus.stop()


def discover(
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Inventory YAML")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Topology file to write "
                                      "(.yaml, or .json)")] = Path("topology.yaml"),
    against: Annotated[Path | None, typer.Option(
        "--against", help="Intended topology: list missing links, miswired ports and "
                          "unexpected neighbours")] = None,
    via: Annotated[str, typer.Option(help="auto (SNMP where listed, else gNMI), snmp, gnmi")]
    = "auto",
    name: Annotated[str, typer.Option(help="Name of the topology")] = "fabric",
    inventory_out: Annotated[Path | None, typer.Option(
        "--inventory-out", help="Write the inventory with every device named")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON")]
    = False,
    db: Annotated[str | None, typer.Option(
        "--db", help="Store each cabling difference as an event here")] = None,
    bootstrap: Annotated[str | None, typer.Option(
        "--bootstrap", "-b", help="Publish each cabling difference on the Kafka events "
                                  "topic")] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Per request, s")] = 2.0,
    max_in_flight: Annotated[int, typer.Option(min=1, help="Devices polled at once")] = 32,
    default_speed_gbps: Annotated[int, typer.Option(
        min=1, help="Speed of ports that do not report one, Gb/s")] = 400,
) -> None:
    """Discover the fabric's topology from LLDP and write the topology document
    that `fabricops up` (scenario `topology: {file: ...}`) and the pipeline read.

    Every inventoried switch is polled once: LLDP-MIB over SNMP, or
    openconfig-lldp over gNMI. Hosts are neighbours that are not inventoried
    switches, or that announce themselves as stations; a switch's tier is its
    hop count to a host (leaf, spine; or leaf, agg, core). The summary shows
    counts per tier, links, speeds and every LLDP row that could not be used.

    An inventory may give addresses only (the switch is named by its sysName):

        targets:
          - {protocol: snmp, address: "10.0.0.11:161", snmp: {community: public}}
          - {protocol: gnmi, address: "10.0.0.12:6030",
             gnmi: {username: admin, password: admin}}

        fabricops discover -i inventory.yaml -o fabric.yaml \\
            --inventory-out named.yaml
        fabricops discover -i named.yaml -o today.yaml --against fabric.yaml \\
            --db sqlite:///fabricops-data/fabricops.db
    """
    with user_errors():
        if via not in ("auto", "snmp", "gnmi"):
            raise fail(f"--via {via}: must be auto, snmp or gnmi")
        with named("--inventory", inventory):
            inv = load_discovery_inventory(inventory)
        intended = None
        if against is not None:
            with named("--against", against):
                intended = load_topology(against)
        config = DiscoveryConfig.model_validate({
            "via": via, "name": name, "timeout_s": timeout, "max_in_flight": max_in_flight,
            "default_speed_bps": default_speed_gbps * 10**9})
        discovery = Discovery(config, inv)
        if not discovery.chosen_targets():
            raise fail(f"--inventory {inventory}: no {via if via != 'auto' else 'SNMP or gNMI'} "
                       "targets to poll")
        with _progress(json_out) as progress:
            result = discovery.run(progress)
        if not any(r.answered for r in result.reports):
            for line in summary_lines(result):
                stderr_console().print(line, markup=False, highlight=False)
            raise fail("no device answered; nothing written")
        save_topology(result.topology, out)
        if inventory_out is not None:
            named_inv = named_inventory(inv, result.names)
            inventory_out.write_text(yaml.safe_dump(named_inv.model_dump(
                mode="json", exclude_defaults=True), sort_keys=False), encoding="utf-8")
        diffs: list[Difference] | None = None
        if intended is not None:
            silent = frozenset(r.device or r.label for r in result.reports
                               if not r.answered)
            diffs = diff_cabling(intended, result.topology, silent)
            if diffs:
                _publish(difference_events(diffs, time.time_ns()), db, bootstrap)
    _report(result, diffs, out, json_out)
    if diffs:
        raise typer.Exit(EXIT_DIFFERENT)


def _report(result: DiscoveryResult, diffs: list[Difference] | None, out: Path,
            json_out: bool) -> None:
    if json_out:
        typer.echo(json.dumps(summary_json(result, str(out), diffs), indent=2))
        return
    for line in summary_lines(result, diffs):
        typer.echo(line)
    typer.echo(f"wrote {out}")
