"""``fabricops actions``: the remediation actions, and an operator's say on them.

Reads and decisions go to a running API (``--api``, or the one at the default
address when it answers) or straight to a store (``--db``); see
:mod:`fabricops.cli.actions_source`. Every decision is one compare-and-set
write: if the remediation service moved the action in the meantime, nothing is
written and the command says what the action is now (exit 1). An unknown id,
or a source that cannot be reached, is bad input (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fabricops.cli.actions_source import Api, Db, open_source, operator_name
from fabricops.cli.api_client import ApiToken
from fabricops.cli.common import AsJson, stdout_console
from fabricops.cli.tables import ALWAYS, Col, listing
from fabricops.core.actions import Action, ActionState, Step
from fabricops.core.wording import counted

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Remediation actions: what fabricops proposes (or did) about each diagnosis, with "
         "their steps, undo steps and audit trail. Approve or reject proposed actions; ask "
         "for an applied one to be rolled back. The remediation service carries decisions "
         "out at its next poll. Talks to the running API (--api, or the one at "
         "127.0.0.1:8080 when it answers) or to a store (--db).",
)

ActionId = Annotated[str, typer.Argument(
    help="The action's id, as fabricops actions list shows it", show_default=False)]
By = Annotated[str | None, typer.Option(
    "--by", help="Your name, recorded as operator:NAME (default: your login name)",
    show_default=False)]
Note = Annotated[str, typer.Option("--note", help="Why, in words; kept in the audit trail")]


@app.command("list")
def list_actions(
    state: Annotated[ActionState | None, typer.Option(help="Only actions in this state")]
    = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many")] = 50,
    as_json: AsJson = False,
    api: Api = None,
    db: Db = None,
    token: ApiToken = "",
) -> None:
    """The actions changed last, newest first.

    Examples: [bold]fabricops actions list --state proposed[/bold] (what waits for you),
    [bold]fabricops actions list --json --limit 500[/bold]
    """
    source = open_source(api, db, token)
    found = source.actions(state, limit)
    if as_json:
        typer.echo(json.dumps([a.model_dump(mode="json") for a in found]))
        return
    console = stdout_console()
    if not found:
        console.print(f"no actions{f' in state {state.value}' if state else ''} in "
                      f"{escape(source.where)}")
        return
    console.print(actions_table(found, console.width))


@app.command()
def show(action_id: ActionId, as_json: AsJson = False, api: Api = None, db: Db = None,
         token: ApiToken = "") -> None:
    """One action: what it does, why, to whom, how to undo it, and its audit trail.

    Example: [bold]fabricops actions show drain-3f2a9c[/bold]
    """
    action = open_source(api, db, token).action(action_id)
    if as_json:
        typer.echo(json.dumps(action.model_dump(mode="json")))
        return
    describe(stdout_console(), action)


@app.command()
def approve(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
            db: Db = None, token: ApiToken = "") -> None:
    """Approve a proposed action; the remediation service applies it at its next poll.

    The audit trail records operator:NAME, the time and your note.
    Example: [bold]fabricops actions approve drain-3f2a9c --note "change CHG-1234"[/bold]
    """
    from fabricops.remediation.decisions import Verb

    action = open_source(api, db, token).decide(action_id, Verb.APPROVE, operator_name(by),
                                                note)
    console = stdout_console()
    console.print(f"action {escape(action.id)} approved by {escape(action.audit[-1].actor)}: "
                  f"the remediation service applies it at its next poll "
                  f"({counted(len(action.steps), 'step')}):")
    _print_steps(console, action.steps)


@app.command()
def reject(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
           db: Db = None, token: ApiToken = "") -> None:
    """Reject a proposed (or approved, not yet applied) action; nothing will be applied.

    Example: [bold]fabricops actions reject drain-3f2a9c --note "job checkpoints at 14:00"[/bold]
    """
    from fabricops.remediation.decisions import Verb

    action = open_source(api, db, token).decide(action_id, Verb.REJECT, operator_name(by),
                                                note)
    stdout_console().print(f"action {escape(action.id)} rejected by "
                           f"{escape(action.audit[-1].actor)}: nothing will be applied")


@app.command()
def rollback(action_id: ActionId, by: By = None, note: Note = "", api: Api = None,
             db: Db = None, token: ApiToken = "") -> None:
    """Ask the remediation service to undo an applied or verified action.

    The action keeps its state, marked with a rollback request; at its next poll
    the service runs the undo steps in order and marks it rolled_back (or failed).
    Example: [bold]fabricops actions rollback drain-3f2a9c --note "link replaced"[/bold]
    """
    from fabricops.remediation.decisions import Verb

    action = open_source(api, db, token).decide(action_id, Verb.ROLLBACK, operator_name(by),
                                                note)
    console = stdout_console()
    console.print(f"rollback of action {escape(action.id)} requested by "
                  f"{escape(action.audit[-1].actor)}: the remediation service undoes "
                  f"{counted(len(action.undo), 'step')} at its next poll:")
    _print_steps(console, action.undo)


def actions_table(found: Sequence[Action], width: int) -> Table:
    """One row per action: what, where, how sure, when it last changed."""
    cols = (Col("id", ALWAYS), Col("state", ALWAYS), Col("kind", 7), Col("target", 8),
            Col("fault type", 4), Col("sure", 3, right=True), Col("last change (UTC)", 6),
            Col("mode", 2), Col("diagnosis", 1))
    rows = [(a.id, a.state.value + (f" ({a.request} requested)" if a.request else ""),
             a.kind.value, a.target, a.fault_type, f"{a.confidence:.0%}", _when(a.ts_ns),
             a.mode.value, a.diagnosis_id) for a in found]
    return listing(f"{counted(len(found), 'action')}, newest change first", cols, rows, width)


def describe(console: Console, a: Action) -> None:
    """Everything about one action, for a person deciding on it."""
    console.print(f"[bold]action {escape(a.id)}[/bold]: {a.kind.value} {escape(a.target)}, "
                  f"[bold]{a.state.value}[/bold] (mode {a.mode.value})")
    if a.request:
        console.print(f"{escape(a.request)} requested, waiting for the remediation service")
    console.print(f"diagnosis {escape(a.diagnosis_id)}: {escape(a.fault_type) or 'no fault type'}"
                  f", confidence {a.confidence:.0%}")
    console.print(f"created {_when(a.created_ns)} UTC, last change {_when(a.ts_ns)} UTC")
    console.print(f"reason: {escape(a.reason) or '(none given)'}")
    console.print(f"affected hosts: {escape(', '.join(a.affected_hosts)) or 'none'}")
    console.print(f"affected jobs: {escape(', '.join(a.affected_jobs)) or 'none'}")
    console.print(steps_table("steps", a.steps, console.width))
    console.print(steps_table("undo steps (filled as steps are applied)", a.undo,
                              console.width))
    console.print(audit_table(a, console.width))


def steps_table(title: str, steps: Sequence[Step], width: int) -> Table:
    """Steps in the order they run, with their parameters."""
    cols = (Col("#", ALWAYS, right=True), Col("operation", ALWAYS), Col("target", ALWAYS),
            Col("parameters", 5, free_text=True))
    rows = [(str(i), step.op.value, step.target,
             " ".join(f"{k}={v}" for k, v in sorted(step.params.items())))
            for i, step in enumerate(steps, start=1)]
    return listing(f"{title}: {len(steps)}", cols, rows, width)


def audit_table(a: Action, width: int) -> Table:
    """Every move of the action: when, who, the state after it, and why."""
    cols = (Col("#", 3, right=True), Col("time (UTC)", ALWAYS), Col("actor", ALWAYS),
            Col("state", ALWAYS), Col("note", 5, free_text=True))
    rows = [(str(i), _when(e.ts_ns), e.actor, e.state.value, e.note)
            for i, e in enumerate(a.audit)]
    return listing("audit trail", cols, rows, width)


def _print_steps(console: Console, steps: Sequence[Step]) -> None:
    for i, step in enumerate(steps, start=1):
        console.print(f"  {i}. {escape(step.describe())}")


def _when(ts_ns: int) -> str:
    return datetime.fromtimestamp(ts_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")
