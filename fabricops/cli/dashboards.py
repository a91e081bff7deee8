"""``fabricops dashboards``: build the Grafana dashboards from code, or push them to a Grafana.

``build`` writes the JSON that Grafana's file provisioning loads (the
docker-compose deployment mounts ``dashboards/json``) and the provisioning
YAML. ``push`` uploads the same dashboards to a running Grafana through its
HTTP API. Bad input exits 2; a Grafana that is unreachable or refuses exits 1.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from fabricops.cli.common import fail, user_errors
from fabricops.core.wording import counted
from fabricops.dashboards import (
    BUILD_DIRS,
    StoreKind,
    build_all,
    write_dashboards,
    write_provisioning,
)
from fabricops.dashboards.push import DashboardPusher, PushConfig, Pushed, PushError

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Grafana dashboards for fabricops (fabric overview, link health, RCA and remediation "
         "timeline, collector health), built as code: write them as JSON for Grafana's "
         "provisioning, or push them to a running Grafana.",
)

#: Exit code for a Grafana that cannot be reached or refuses (bad input exits 2).
EXIT_GRAFANA = 1


class Store(StrEnum):
    """The store the SQL panels read: its kind picks their SQL and data source."""

    POSTGRESQL = "postgresql"
    SQLITE = "sqlite"


STORE_HELP = ("Store the SQL panels read: postgresql (Grafana's PostgreSQL data source) or "
              "sqlite (the frser-sqlite-datasource plugin, the file from "
              "$FABRICOPS_SQLITE_PATH)")


@app.command()
def build(
    store: Annotated[Store, typer.Option("--store", help=STORE_HELP)] = Store.POSTGRESQL,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Folder for the dashboards' JSON (one file per dashboard); default "
                      "dashboards/json, or dashboards/sqlite/json for sqlite",
        show_default=False)] = None,
    provisioning: Annotated[Path | None, typer.Option(
        "--provisioning", help="Folder for Grafana's provisioning YAML (datasources/, "
                               "dashboards/); default dashboards/provisioning, or "
                               "dashboards/sqlite/provisioning for sqlite",
        show_default=False)] = None,
) -> None:
    """Write every dashboard's JSON and the provisioning YAML, the same bytes on every run.

    Examples: [bold]fabricops dashboards build[/bold],
    [bold]fabricops dashboards build --store sqlite[/bold] (from the repository's root)
    """
    kind: StoreKind = "sqlite" if store is Store.SQLITE else "postgresql"
    json_dir, yaml_dir = BUILD_DIRS[kind]
    with user_errors():
        written = (write_dashboards(out or json_dir, kind)
                   + write_provisioning(provisioning or yaml_dir, kind))
    for path in written:
        typer.echo(f"wrote {path}")


@app.command()
def push(
    url: Annotated[str | None, typer.Option(
        "--url", envvar="GRAFANA_URL", help="Grafana's base URL, e.g. http://grafana:3000",
        show_default=False)] = None,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="GRAFANA_TOKEN", help="Service account token (or API key)",
        show_default=False)] = None,
    user: Annotated[str | None, typer.Option(
        "--user", help="User name, instead of a token", show_default=False)] = None,
    password: Annotated[str | None, typer.Option(
        "--password", envvar="GRAFANA_PASSWORD", help="The user's password",
        show_default=False)] = None,
    folder: Annotated[str, typer.Option(
        "--folder", help="Title of the folder to put them in (created if missing; '' for "
                         "General)")] = "fabricops",
    overwrite: Annotated[bool, typer.Option(
        "--overwrite/--no-overwrite",
        help="Replace dashboards with the same uid, whatever their version")] = True,
    timeout_s: Annotated[float, typer.Option(
        "--timeout-s", min=0.1, help="Seconds to wait for each answer")] = 10.0,
    store: Annotated[Store, typer.Option("--store", help=STORE_HELP)] = Store.POSTGRESQL,
) -> None:
    """Upload every dashboard to a running Grafana.

    Examples: [bold]fabricops dashboards push --url http://localhost:3000 --token $TOKEN[/bold],
    [bold]GRAFANA_URL=http://grafana:3000 fabricops dashboards push --user admin
    --password admin --folder RoCE[/bold]
    """
    if not url:
        raise fail("no Grafana URL: give --url or set GRAFANA_URL")
    if token and user:
        raise fail("give either --token (or GRAFANA_TOKEN) or --user and --password, not both")
    try:
        config = PushConfig(url=url, token=token or None, user=user or None,
                            password=password or None, folder=folder, overwrite=overwrite,
                            timeout_s=timeout_s)
    except ValidationError as exc:
        raise fail("; ".join(str(e["msg"]).removeprefix("Value error, ")
                             for e in exc.errors())) from None
    pusher = DashboardPusher(config)

    def pushed(done: Pushed) -> None:
        typer.echo(f"pushed {done.file_name}: {done.title} (uid {done.uid}, version "
                   f"{done.version}) {done.url}")

    try:
        done = pusher.push(build_all("sqlite" if store is Store.SQLITE else "postgresql"),
                           on_pushed=pushed)
    except PushError as exc:
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        raise typer.Exit(EXIT_GRAFANA) from None
    where = f"folder {config.folder!r}" if config.folder else "the General folder"
    typer.echo(f"{counted(len(done), 'dashboard')} pushed to {pusher.where}, {where}")
