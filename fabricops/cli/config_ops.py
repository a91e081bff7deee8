"""``fabricops config check | apply | drift``: the running configuration against the plan."""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

import typer

from fabricops.cli.common import fail, stdout_console
from fabricops.cli.config import JsonOpt, SetOpt, TopologyOpt, app, plan_of
from fabricops.cli.config_read import GnmiOpt, GnmiReader, InventoryOpt, compress, gnmi_reader
from fabricops.cli.tables import ALWAYS, Col, listing
from fabricops.config.apply import ApplyOutcome, ConfigApplier
from fabricops.config.check import CHECKS, CheckReport, check_fabric
from fabricops.config.drift import DriftConfig, DriftResult, DriftWatch
from fabricops.config.running import intended_settings
from fabricops.core.actions import ActionMode, ActionState
from fabricops.core.roce_settings import SettingValue
from fabricops.core.topology import load_topology

EXIT_FINDINGS = 1


def _groups(report: CheckReport) -> list[list[str]]:
    """Findings of the same check, setting and expected value as one row (the value
    found, or how many different values were)."""
    rows: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    found: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for f in report.findings:
        key = (f.check, f.setting, f.expected)
        rows[key].append(f"{f.device}:{f.port}" if f.port else f.device)
        found[key].add(f.found)
    return [[c, s, next(iter(found[k])) if len(found[k]) == 1 else f"{len(found[k])} values",
             exp, str(len(w)), compress(w)] for k, w in rows.items() for c, s, exp in [k]]


def print_report(report: CheckReport, reader: GnmiReader | None) -> None:
    console = stdout_console()
    width = console.width
    summary = [[c, str(report.checked[c]), str(report.failed(c)),
                "ok" if not report.failed(c) else "FAIL"] for c in CHECKS]
    console.print(listing("Checks", [Col("check", ALWAYS), Col("checked", ALWAYS, right=True),
                                     Col("failed", ALWAYS, right=True), Col("result", ALWAYS)],
                          summary, width))
    cols = [Col("setting", ALWAYS), Col("found", ALWAYS), Col("expected", ALWAYS),
            Col("n", 4, right=True), Col("where", ALWAYS, free_text=True)]
    groups = _groups(report)
    for check in CHECKS:
        rows = [row[1:] for row in groups if row[0] == check]
        if rows:
            console.print(listing(f"Findings: {check}", cols, rows, width))
    hosts = [d for d, why in report.unread.items() if "host" in why]
    other = {d: why for d, why in report.unread.items() if d not in hosts}
    if hosts:
        console.print(f"not read: {len(hosts)} host(s): {compress(hosts)} "
                      "(NIC settings are checked on the host)")
    for device, why in sorted(other.items()):
        console.print(f"not read: {device}: {why}")
    if reader is not None and reader.unmapped:
        device, path, why = reader.unmapped[0]
        console.print(f"unused: {len(reader.unmapped)} answered path(s) name no setting or "
                      f"break its range, e.g. {device} {path}: {why}")
    verdict = "[green]all checks pass[/green]" if report.ok else \
        f"[red]{len(report.findings)} finding(s)[/red]"
    console.print(f"{verdict} ({sum(report.checked.values())} items checked)")


@app.command("check")
def check_cmd(topology: TopologyOpt, gnmi: GnmiOpt = None, inventory: InventoryOpt = None,
              settings: SetOpt = None, as_json: JsonOpt = False) -> None:
    """Read the switches' running RoCE settings and check the fabric as a whole.

    Checks: every setting as planned (intent); the lossless priority with PFC on
    both ends of every link (NICs too); ECN wherever PFC is; ECN thresholds in range
    for the port speed; headroom enough for the cable; equal MTU on link ends;
    distinct ECMP hash seeds per tier. Exit 0 if all pass, 1 on findings, 2 on bad
    input. Example against the twin:

        fabricops config check --topology t.json --gnmi 127.0.0.1:57400
    """
    plan = plan_of(topology, settings)
    reader = gnmi_reader(plan, gnmi, inventory)
    devices = [*(s.device for s in plan.switches), *(h.device for h in plan.hosts)]
    running, unread = reader(devices)
    if not running:
        raise fail("no switch could be read: " + compress(
            [f"{d}: {w}" for d, w in unread.items() if d not in reader.hosts], 1))
    report = check_fabric(plan, running, unread)
    if as_json:
        doc = report.as_dict()
        doc["unmapped"] = [{"device": d, "path": p, "why": w} for d, p, w in reader.unmapped]
        typer.echo(json.dumps(doc, indent=2))
    else:
        print_report(report, reader)
    if not report.ok:
        raise typer.Exit(EXIT_FINDINGS)


def _engine(topology: Path, mode: ActionMode, addresses: dict[str, str],
            intent: dict[str, dict[str, SettingValue]] | None = None) -> Any:
    from fabricops.remediation.actuator import Actuators
    from fabricops.remediation.engine import RemediationConfig, RemediationEngine
    from fabricops.remediation.gnmi_actuator import GnmiSetActuator, GnmiSetConfig
    from fabricops.remediation.safety import SafetyConfig
    from fabricops.remediation.watch import FabricWatch

    topo = load_topology(topology)
    actuator = GnmiSetActuator(GnmiSetConfig(), addresses)
    config = RemediationConfig(safety=SafetyConfig(mode=mode))
    return RemediationEngine(config, topo, Actuators.single(actuator), FabricWatch(topo),
                             intent=intent)


def print_outcome(out: ApplyOutcome) -> None:
    console = stdout_console()
    if out.action is None:
        console.print("Nothing to change: every setting read runs its intent.")
    else:
        a = out.action
        console.print(f"Action {a.id} ({a.kind.value}): {a.reason}")
        for entry in a.audit:
            note = entry.note if len(entry.note) <= 48 else entry.note[:45] + "..."
            console.print(f"  {entry.state.value:10} {entry.actor:14} {note}")
        for device, key, found, expected in out.mismatches[:10]:
            console.print(f"  not in effect: {device} {key} is {found}, intent {expected}")
    if out.unread:
        console.print(f"not read (left as they are): {compress(sorted(out.unread))}")


@app.command("apply")
def apply_cmd(
    topology: TopologyOpt, gnmi: GnmiOpt = None, inventory: InventoryOpt = None,
    settings: SetOpt = None,
    mode: Annotated[ActionMode, typer.Option(
        "--mode", help="auto: apply now through the safety envelope, read back, roll back "
        "if not in effect; observe: only show the action that would run")] = ActionMode.AUTO,
    as_json: JsonOpt = False,
) -> None:
    """Make the switches run the plan: write what differs, as one audited action.

    The action goes through remediation's safety envelope (mode, blast radius,
    pre-check, undo on a failed step); once applied every written setting is read
    back, and the action is verified, or rolled back to the values it replaced.
    Exit 0 when nothing differs or the action is verified, 1 otherwise.

        fabricops config apply --topology t.json --gnmi 127.0.0.1:57400
    """
    if mode is ActionMode.APPROVE:
        raise fail("--mode approve: run 'fabricops up --remediation approve' for actions "
                   "that wait for a person; apply takes auto or observe")
    plan = plan_of(topology, settings)
    reader = gnmi_reader(plan, gnmi, inventory)
    engine = _engine(topology, mode, reader.client.addresses)
    applier = ConfigApplier(engine, reader, plan.fabric.name, mode)
    out = applier.apply(intended_settings(plan), time.time_ns())
    switches_unread = [d for d in out.unread if d not in reader.hosts]
    if len(switches_unread) == len(plan.switches):
        raise fail("no switch could be read: " + compress(
            [f"{d}: {out.unread[d]}" for d in switches_unread], 1))
    if as_json:
        typer.echo(json.dumps(out.as_dict(), indent=2))
    else:
        print_outcome(out)
    done = out.action is None or out.action.state is ActionState.VERIFIED or (
        mode is ActionMode.OBSERVE and out.action.state is ActionState.PROPOSED)
    if not done:
        raise typer.Exit(EXIT_FINDINGS)


def _event_lines(result: DriftResult) -> list[str]:
    """One line per device, event kind, setting and value: ports counted, not listed."""
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for e in result.events:
        detail = e.detail.split(" ", 1)[-1]
        groups[(e.kind.value, e.device, e.metric.removeprefix("config."), detail)].append(
            e.entity)
    lines = []
    for (kind, device, leaf, detail), where in groups.items():
        ports = f" on {len(where)} port(s)" if where[0] != device else ""
        lines.append(f"{kind:12} {device}{ports}: {leaf} {detail}")
    return lines


@app.command("drift")
def drift_cmd(
    topology: TopologyOpt, gnmi: GnmiOpt = None, inventory: InventoryOpt = None,
    settings: SetOpt = None,
    interval_s: Annotated[float, typer.Option("--interval", min=1.0,
                                              help="Seconds between reads")] = 60.0,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit")] = False,
    restore: Annotated[bool, typer.Option(
        "--restore", help="Carry out each diagnosis's remedy: restore the drifted settings "
        "through remediation's safety envelope (auto mode)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Watch the running configuration for settings that leave their intent.

    Each pass prints an event per setting that left (or came back to) its intent
    and a config_drift diagnosis per device naming the settings to restore;
    with --restore, remediation restores them. Exit 1 after --once if anything
    drifted.

        fabricops config drift --topology t.json --gnmi 127.0.0.1:57400 --once
    """
    plan = plan_of(topology, settings)
    reader = gnmi_reader(plan, gnmi, inventory)
    switches = {s.device: v for s, v in zip(plan.switches, (
        intended_settings(plan)[s.device] for s in plan.switches), strict=True)}
    engine: Any = _engine(topology, ActionMode.AUTO, reader.client.addresses, switches) \
        if restore else None

    def show(result: DriftResult) -> None:
        for d in result.diagnoses if restore else ():
            action = engine.on_diagnosis(d, time.time_ns())
            if action is not None and not as_json:
                typer.echo(f"action {action.id}: {action.kind.value} {action.target} -> "
                           f"{action.state.value}: {action.reason}")
        if as_json:
            typer.echo(json.dumps({"events": [e.model_dump(mode="json") for e in result.events],
                                   "diagnoses": [d.model_dump(mode="json")
                                                 for d in result.diagnoses],
                                   "unread": result.unread}))
            return
        for line in _event_lines(result):
            typer.echo(line)
        for d in result.diagnoses:
            typer.echo(f"diagnosis {d.id}: {d.root}: {d.action}")
        for device, why in sorted(result.unread.items()):
            typer.echo(f"not read: {device}: {why}")

    watch = DriftWatch(DriftConfig(interval_s=interval_s), switches, reader, show, time.time_ns)
    if once:
        result = watch.check_once()
        if len(result.unread) == len(switches):
            raise fail("no switch could be read")
        if result.diagnoses:
            raise typer.Exit(EXIT_FINDINGS)
        return
    watch.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        watch.stop()
