"""``fabricops query``: series, latest values and events from the store.

The store (SQLAlchemy) is imported when one is opened, and the series reader
(NumPy, the keyframe decoder) by the commands that decode series: ``--help``
and the ``actions`` commands that talk to an API, which share this module's
``opened``, start without them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from fabricops.cli.common import AsJson, fail, stdout_console, user_errors
from fabricops.cli.tables import ALWAYS, Col, listing
from fabricops.core.records import Event, EventKind
from fabricops.core.wording import counted

if TYPE_CHECKING:
    from fabricops.store.store import Store

app = typer.Typer(no_args_is_help=True, help=(
    "Read what the pipeline stored: a series over a range (raw or as rates), the latest "
    "values of entities, and key events. Times are the telemetry's own; --last counts "
    "back from the newest data in the store."))

Db = Annotated[str, typer.Option(
    "--db", envvar="FABRICOPS_STORE__URL",
    help="Store URL: sqlite:///PATH or postgresql://USER@HOST/DB")]
Last = Annotated[str | None, typer.Option(
    "--last", help="Only the last DURATION before the newest data: 90s, 10m, 2h")]
DEFAULT_DB = "sqlite:///fabricops-data/fabricops.db"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


MAX_DAYS = 36_500
"""The longest duration an option takes (a hundred years): longer ones overflow the
store's 64-bit nanoseconds."""


def parse_duration(text: str, option: str = "--last", at_least: str = "") -> float:
    """``90s``, ``10m``, ``2h``, ``1d`` or plain seconds (at most ``MAX_DAYS``, and at
    least the duration ``at_least`` if given) -> seconds; ValueError names it and
    ``option``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise ValueError(f"{option} {text!r}: expected a duration such as 90s, 10m, 2h or 1d")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds > MAX_DAYS * 86400:
        raise ValueError(f"{option} {text!r}: at most {MAX_DAYS}d")
    if at_least and seconds < parse_duration(at_least):
        raise ValueError(f"{option} {text!r}: at least {at_least}")
    return seconds


def parse_retention(text: str, option: str = "--retention") -> float:
    """Seconds of a retention: a duration of at least an hour; ValueError names it."""
    return parse_duration(text, option, at_least="1h")


@contextmanager
def opened(url: str, retention_s: float | None = None) -> Iterator[Store]:
    """The store at ``url`` (keeping ``retention_s`` if given), without creating or
    migrating anything."""
    from fabricops.store.store import Store, StoreConfig, StoreError

    config = StoreConfig(url=url, migrate_on_start=False)
    if retention_s is not None:
        config = config.model_copy(update={"retention_s": retention_s})
    store = Store(config)
    with user_errors():
        try:
            store.start()
        except StoreError as exc:
            raise fail(str(exc)) from None
    try:
        yield store
    finally:
        store.stop()


def _range(store: Store, last: str | None) -> tuple[int, int]:
    newest = store.newest_ns()
    if last is None:
        return 0, max(newest, 2**62)
    return newest - round(parse_duration(last) * 1e9), newest


def _when(ts_ns: int) -> str:
    """UTC to the millisecond, as tables show it; ``--json`` keeps nanoseconds."""
    return datetime.fromtimestamp(ts_ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@app.command("series")
def series(entity: Annotated[str, typer.Argument(help="Port or NIC, e.g. leaf-0-0:eth3")],
           metric: Annotated[str, typer.Argument(help="Catalogue metric, e.g. out_octets")],
           db: Db = DEFAULT_DB, last: Last = None,
           rate: Annotated[bool, typer.Option("--rate", help="Counters as per-second rates")]
           = False,
           source: Annotated[str | None, typer.Option(help="snmp, gnmi or sim")] = None,
           as_json: AsJson = False) -> None:
    """One series over a range, reconstructed from its keyframe segments."""
    import numpy as np

    from fabricops.pipeline.query import QueryError, read_series

    with opened(db) as store, user_errors():
        t0, t1 = _range(store, last)
        try:
            data = read_series(store, entity=entity, metric=metric, t0_ns=t0, t1_ns=t1,
                               rate=rate, source=source)
        except QueryError as exc:
            raise fail(str(exc)) from None
    values = [None if isinstance(v, float) and np.isnan(v) else v
              for v in data.values.tolist()]
    if as_json:
        typer.echo(json.dumps({"entity": entity, "metric": metric, "source": data.source,
                               "kind": data.kind.value, "rate": rate,
                               "max_error": data.max_error, "ts_ns": data.ts_ns.tolist(),
                               "values": values}))
        return
    if not len(data.ts_ns):
        raise fail(f"no samples of {metric} on {entity} in the store for that range")
    table = Table(title=f"{entity} {metric}{' rate/s' if rate else ''} ({data.source})")
    table.add_column("time (UTC)")
    table.add_column("value", justify="right")
    for ts, v in zip(data.ts_ns.tolist(), values, strict=True):
        table.add_row(_when(ts), "unknown" if v is None else f"{v:,.6g}"
                      if isinstance(v, float) else f"{v:,}")
    stdout_console().print(table)


@app.command("latest")
def latest_values(entities: Annotated[list[str], typer.Argument(help="Ports or NICs")],
                  metric: Annotated[list[str], typer.Option(
                      "--metric", "-m", help="Metric to show (repeat for more)")],
                  db: Db = DEFAULT_DB, lookback: Annotated[str, typer.Option(
                      help="How far back from the newest data to look")] = "10m",
                  as_json: AsJson = False) -> None:
    """The newest value stored of each metric on each entity.

    The store holds written windows: values trail live telemetry by up to a
    window and a half (90 s at the default 60 s windows); live trouble shows
    in `fabricops diagnose` and on the metrics endpoint."""
    from fabricops.pipeline.query import latest

    with opened(db) as store, user_errors():
        _, newest = _range(store, "0s")
        rows = latest(store, entities=entities, metrics=metric,
                      lookback_s=parse_duration(lookback), now_ns=newest)
    if as_json:
        typer.echo(json.dumps([r.__dict__ for r in rows]))
        return
    console = stdout_console()
    console.print(listing("latest values", (
        Col("entity", ALWAYS), Col("metric", ALWAYS), Col("time (UTC)", 5),
        Col("value", ALWAYS, right=True)),
        [(r.entity, r.metric, _when(r.ts_ns), f"{r.value:,}") for r in rows], console.width))


@app.command("events")
def events(db: Db = DEFAULT_DB, last: Last = None,
           device: Annotated[list[str] | None, typer.Option(help="Only these devices")] = None,
           entity: Annotated[list[str] | None, typer.Option(help="Only these entities")] = None,
           kind: Annotated[EventKind | None, typer.Option(help="Only this kind")] = None,
           limit: Annotated[int, typer.Option(min=1)] = 200, as_json: AsJson = False) -> None:
    """Key events (state changes, threshold crossings, anomalies) in time order."""
    with opened(db) as store, user_errors():
        t0, t1 = _range(store, last)
        found = store.events(t0_ns=t0, t1_ns=t1, devices=device, entities=entity,
                             kind=kind.value if kind else None, limit=limit)
    if as_json:
        typer.echo(json.dumps([e.model_dump(mode="json") for e in found]))
        return
    console = stdout_console()
    console.print(events_table(found, console.width))


def events_table(found: Sequence[Event], width: int) -> Table:
    """One row per event, oldest first; details wrap, the rest never does."""
    cols = (Col("time (UTC)", ALWAYS), Col("severity", 3), Col("kind", 8),
            Col("entity", ALWAYS), Col("metric", 7), Col("value", 5, right=True),
            Col("detail", 4, free_text=True))
    rows = [(_when(e.ts_ns), e.severity.value, e.kind.value, e.entity, e.metric,
             f"{e.value:,.6g}", e.detail) for e in found]
    return listing(counted(len(found), "event"), cols, rows, width)
