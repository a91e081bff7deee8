"""``fabricops diagnose``: one question, one answer, from the running API.

Exit status: 0 when no incident is open, 1 when one is (being healed or not),
2 when the API cannot be asked.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from fabricops.cli.api_client import DEFAULT_API, ApiClient, ApiError, ApiUrl
from fabricops.cli.common import EXIT_BAD_INPUT, fail, stdout_console
from fabricops.cli.tables import ALWAYS, Col, listing

#: Exit code when an incident is open.
EXIT_INCIDENT = 1
_COLOUR = {"ok": "green", "healing": "yellow", "fault": "red"}


def diagnose(
    api: ApiUrl = DEFAULT_API,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
) -> None:
    """What is wrong with the fabric now: what, where, since when, how sure, the
    evidence, whom it hurts, and what fabricops did or proposes.

    Asks the running fabricops API (fabricops up starts one on 127.0.0.1:8080).
    Exit status: 0 healthy, 1 an incident is open, 2 the API cannot be asked.

        fabricops diagnose
        fabricops diagnose --json | jq '.incidents[0].root'
        fabricops diagnose --api http://fabricops.example:8080 || page-oncall
    """
    try:
        report = ApiClient(api).get("/api/v1/diagnose")
    except ApiError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(report))
    else:
        render_report(stdout_console(), report)
    if report.get("health") != "ok":
        raise typer.Exit(EXIT_INCIDENT)


def render_report(console: Console, report: dict[str, Any]) -> None:
    """The headline, then each open incident with its evidence and actions."""
    health = str(report.get("health", "?"))
    colour = _COLOUR.get(health, "white")
    console.print(f"[bold {colour}]{health.upper()}[/]: {escape(str(report.get('summary')))}")
    for incident in report.get("incidents", []):
        _incident(console, incident)


def _incident(console: Console, i: dict[str, Any]) -> None:
    console.print()
    console.print(f"[bold]{escape(i['fault_type'])}[/bold] at [bold]{escape(i['root'])}[/bold]"
                  f" ({escape(i['root_kind'])}), {i['confidence']:.0%} sure, "
                  f"[bold]{escape(i['status'])}[/bold]")
    console.print(f"  since {_clock(i['since'])} UTC, last seen {_clock(i['last_seen'])} UTC; "
                  f"incident {escape(i['diagnosis_id'])}")
    console.print(f"  neighbours: {escape(', '.join(i['neighbours'])) or '-'}")
    console.print(f"  affected jobs: {escape(', '.join(i['affected_jobs'])) or 'none'}; "
                  f"hosts: {escape(_few(i['affected_hosts']))}")
    if i.get("alternatives"):
        others = ", ".join(f"{a['entity']} {a['fault_type']} {a['probability']:.0%}"
                           for a in i["alternatives"])
        console.print(f"  other candidates: {escape(others)}")
    if i.get("missing"):
        console.print(f"  [yellow]telemetry missing:[/] {escape(', '.join(i['missing']))}")
    if i.get("evidence"):
        cols = (Col("entity", ALWAYS), Col("signal", ALWAYS), Col("value", ALWAYS, right=True),
                Col("baseline", 4, right=True), Col("note", 3, free_text=True))
        rows = [(e["entity"], e["signal"], f"{e['value']:.4g}",
                 "" if e.get("baseline") is None else f"{e['baseline']:.4g}",
                 e.get("note", "")) for e in i["evidence"]]
        console.print(listing("evidence", cols, rows, console.width))
    console.print(f"  recommended: {escape(i.get('recommended') or '-')}")
    for a in i.get("actions", []):
        request = f", {a['request']} requested" if a.get("request") else ""
        console.print(f"  action {escape(a['id'])}: {escape(a['kind'])} {escape(a['target'])}"
                      f" [bold]{escape(a['state'])}[/bold]{escape(request)} "
                      f"({escape(a['last_note'])})")
        if a["state"] == "proposed":
            console.print(f"    approve with: fabricops actions approve {escape(a['id'])}")


def _clock(iso: str) -> str:
    return iso[11:19] if len(iso) >= 19 else iso


def _few(items: list[str], shown: int = 6) -> str:
    if not items:
        return "none"
    more = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


__all__ = ["EXIT_BAD_INPUT", "EXIT_INCIDENT", "diagnose", "render_report"]
