"""``fabricops config twin | validate``: a twin that runs a configuration, and traffic on it.

``twin`` serves a topology's switches over gNMI (and SNMP) with factory settings,
optionally with wrong settings planted; ``check`` and ``apply`` work on it as on a real
fabric. ``validate`` runs validation traffic on an in-process twin that runs the
configuration read from the switches (or, without ``--gnmi``/``--inventory``, the
plan itself), judges it, and writes the perftest / NCCL tests commands for real hosts;
outputs of those tools (``--ib-write-bw``, ``--nccl``) are judged against line rate.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricops.cli.common import fail, stdout_console
from fabricops.cli.config import JsonOpt, SetOpt, TopologyOpt, app, plan_of
from fabricops.cli.config_read import GnmiOpt, InventoryOpt, compress, gnmi_reader
from fabricops.cli.tables import ALWAYS, Col, listing
from fabricops.config.plan import FabricPlan
from fabricops.config.running import intended_settings
from fabricops.config.validate import (
    TrafficMeasurement,
    ValidationBounds,
    Verdict,
    host_commands,
    judge,
    parse_ib_write_bw,
    parse_nccl,
)
from fabricops.core.topology import load_topology

PATTERNS = ("all_to_all", "ring")


def _parse_fault(text: str) -> dict[str, Any]:
    """``TYPE=ENTITY`` or ``TYPE=ENTITY@SECONDS`` (starting that many seconds in)."""
    kind, sep, rest = text.partition("=")
    entity, at, start = rest.partition("@")
    try:
        start_s = float(start) if at else 0.0
    except ValueError:
        start_s = -1.0
    if not sep or not entity or start_s < 0:
        raise fail(f"--fault {text!r}: write TYPE=ENTITY or TYPE=ENTITY@SECONDS, e.g. "
                   "mtu_mismatch=leaf-0:eth9~spine-0:eth1 or ecn_misconfig=leaf-2@30")
    return {"type": kind, "entity": entity, "start_s": start_s}


@app.command("twin")
def twin_cmd(
    topology: TopologyOpt,
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="gNMI port (0: any free port)")] = 57400,
    faults: Annotated[list[str] | None, typer.Option(
        "--fault", metavar="TYPE=ENTITY[@S]", help="Plant a wrong setting (or any fault) at "
        "start, or S seconds in; e.g. mtu_mismatch=LINK, pfc_priority_mismatch=LINK, "
        "headroom_short=LINK, ecn_threshold=SWITCH, ecn_misconfig=SWITCH, "
        "hash_seed_equal=SWITCH")] = None,
    duration_s: Annotated[float, typer.Option("--duration", min=0.0,
                                              help="Stop after this many seconds (0: "
                                                   "until Ctrl-C)")] = 0.0,
) -> None:
    """Serve a topology as a twin whose switches run factory RoCE settings over gNMI.

    Check it, apply a plan to it, plant wrong settings with --fault:

        fabricops config twin --topology t.json --fault mtu_mismatch=LINK &
    """
    from fabricops.simulator.agents.gnmi_target import GnmiTargetConfig
    from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
    from fabricops.simulator.engine import Simulator
    from fabricops.simulator.faults import FaultError, parse_fault

    sim = Simulator(load_topology(topology))
    try:
        for i, text in enumerate(faults or []):
            sim.add_fault(parse_fault(_parse_fault(text), i))
    except FaultError as exc:
        raise fail(str(exc)) from None
    twin = SimulatedFabric(sim, SimulatedFabricConfig(gnmi=GnmiTargetConfig(port=port)))
    try:
        twin.start()
    except OSError as exc:
        raise fail(f"{exc}; pick another --port") from None
    typer.echo(f"twin of {sim.fabric.topology.name}: {len(twin.switches)} switches on gNMI "
               f"{twin.gnmi.address} (Ctrl-C stops)", err=False)
    try:
        deadline = time.monotonic() + duration_s if duration_s else None
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        twin.stop()


def _twin_running(plan: FabricPlan, topology: Path, gnmi: str | None,
                  inventory: Path | None) -> tuple[Any, str]:
    """An in-process twin running the switches' settings (or the plan); and whence."""
    from fabricops.simulator.engine import Simulator

    sim = Simulator(load_topology(topology))
    if gnmi or inventory:
        reader = gnmi_reader(plan, gnmi, inventory)
        running, unread = reader([s.device for s in plan.switches])
        if not running:
            raise fail("no switch could be read: " + compress(list(unread.values()), 1))
        source = f"the settings {len(running)} switch(es) run"
        if unread:
            source += f" ({len(unread)} not read, twin defaults: {compress(sorted(unread))})"
        for host in plan.hosts:
            running[host.device] = intended_settings(plan)[host.device]
    else:
        running, source = intended_settings(plan), f"the plan ({plan.template.name})"
    for device, values in running.items():
        sim.settings.set(device, values)
    return sim, source


def _rows(name: str, verdicts: list[Verdict]) -> list[list[str]]:
    return [[name, v.criterion, "ok" if v.ok else "FAIL", v.found, v.bound, v.where]
            for v in verdicts]


@app.command("validate")
def validate_cmd(
    topology: TopologyOpt, gnmi: GnmiOpt = None, inventory: InventoryOpt = None,
    settings: SetOpt = None,
    hosts: Annotated[str | None, typer.Option(
        "--hosts", metavar="H1,H2,...", help="Hosts that exchange traffic (default: all)")] = None,
    bursts: Annotated[int, typer.Option("--bursts", min=1, max=100,
                                        help="Bursts of traffic per pattern")] = 3,
    commands: Annotated[bool, typer.Option("--commands", help="Print the perftest and NCCL "
                                           "tests commands for real hosts")] = False,
    ib_write_bw: Annotated[Path | None, typer.Option(
        "--ib-write-bw", metavar="FILE", help="Judge an ib_write_bw output too")] = None,
    nccl: Annotated[Path | None, typer.Option(
        "--nccl", metavar="FILE", help="Judge an all_reduce_perf output too")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run validation traffic (all-to-all, ring all-reduce) on the twin and judge it.

    The twin runs what the switches run (--gnmi/--inventory) or the plan. Passing
    means zero drops, pause time and ECN marking within bounds, and bus bandwidth of
    at least 75 % of line rate. Exit 0 if every verdict passes, 1 otherwise.

        fabricops config validate --topology t.json --gnmi 127.0.0.1:57400
    """
    from fabricops.simulator.validation import TrafficSpec, run_traffic

    plan = plan_of(topology, settings)
    chosen = tuple(h.strip() for h in hosts.split(",") if h.strip()) if hosts else ()
    sim, source = _twin_running(plan, topology, gnmi, inventory)
    bounds = ValidationBounds()
    results: list[dict[str, Any]] = []
    rows: list[list[str]] = []
    for pattern in PATTERNS:
        try:
            raw = run_traffic(sim, TrafficSpec(pattern=pattern, hosts=chosen, bursts=bursts))
        except ValueError as exc:
            raise fail(f"--hosts: {exc}") from None
        m = TrafficMeasurement.model_validate(raw)
        verdicts = judge(m, bounds)
        rows += _rows(pattern, verdicts)
        results.append({"measurement": m.model_dump(), "verdicts": [v.__dict__ for v in verdicts]})
    rows += _tool_rows(plan, ib_write_bw, nccl, bounds, results)
    ok = all(r[2] == "ok" for r in rows)
    hosts_used = list(chosen) or [h.device for h in plan.hosts]
    cmds = host_commands(hosts_used, rdma_devices=[n.rdma_device for n in plan.hosts[0].nics]) \
        if commands and plan.hosts else []
    if as_json:
        typer.echo(json.dumps({"ok": ok, "source": source, "results": results,
                               "commands": cmds}, indent=2))
    else:
        console = stdout_console()
        console.print(f"Twin configured with {source}")
        cols = [Col("traffic", ALWAYS), Col("criterion", ALWAYS), Col("result", ALWAYS),
                Col("found", ALWAYS), Col("bound", 6), Col("where", 4, free_text=True)]
        console.print(listing("Validation", cols, rows, console.width))
        for line in cmds:
            typer.echo(line)
        console.print("[green]validation passed[/green]" if ok else
                      "[red]validation failed[/red]")
    if not ok:
        raise typer.Exit(1)


def _tool_rows(plan: FabricPlan, ib: Path | None, nccl: Path | None, bounds: ValidationBounds,
               results: list[dict[str, Any]]) -> list[list[str]]:
    """Verdicts on real hosts' tool outputs: bandwidth as a share of the NIC speed."""
    if not (ib or nccl):
        return []
    if not plan.hosts:
        raise fail("--ib-write-bw/--nccl: the topology has no hosts to take a NIC speed from")
    line_gbps = min(n.speed_bps for n in plan.hosts[0].nics) / 1e9
    rows = []
    for path, parse, scale, name in ((ib, parse_ib_write_bw, 1.0, "ib_write_bw"),
                                     (nccl, parse_nccl, 8.0, "all_reduce_perf")):
        if path is None:
            continue
        try:
            run = parse(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise fail(f"{name} output {path}: {exc}") from None
        share = run.value * scale / line_gbps
        ok = share >= bounds.min_busbw_share
        rows.append([name, "bandwidth", "ok" if ok else "FAIL",
                     f"{run.value:g} {run.unit} = {share:.0%} of {line_gbps:g}G",
                     f">= {bounds.min_busbw_share:.0%}",
                     f"{run.skipped_lines} line(s) not read" if run.skipped_lines else ""])
        results.append({"tool": name, "value": run.value, "unit": run.unit, "share": share,
                        "skipped_lines": run.skipped_lines})
    return rows
