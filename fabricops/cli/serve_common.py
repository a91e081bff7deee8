"""What every long-running command shares: options, the bus, the metrics port, and the
simulated gNMI target's TLS and login (``serve sim`` and ``up``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from prometheus_client import start_http_server

from fabricops.cli.lifecycle import Running
from fabricops.cli.preflight import StartupError, named, reachable_bootstrap
from fabricops.core.bus import Bus
from fabricops.core.bus_factory import BusConfig, make_bus
from fabricops.core.inventory import GnmiCredentials, Inventory

BusKind = Annotated[str, typer.Option("--bus", envvar="FABRICOPS_BUS__KIND",
                                      help="memory (in-process) or kafka")]
Bootstrap = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="FABRICOPS_BUS__BOOTSTRAP_SERVERS",
    help="Kafka bootstrap servers, with --bus kafka")]
Db = Annotated[str, typer.Option("--db", envvar="FABRICOPS_STORE__URL",
                                 help="Store URL (SQLite file or PostgreSQL)")]
TopologyFile = Annotated[Path, typer.Option(
    "--topology", envvar="FABRICOPS_TOPOLOGY", help="Topology file (JSON or YAML)",
    show_default=False)]
JobsFile = Annotated[Path | None, typer.Option(
    "--jobs", envvar="FABRICOPS_JOBS", help="Job placement YAML (jobs: {JOB: [HOST, ...]})")]
MetricsPort = Annotated[int, typer.Option(
    "--metrics-port", envvar="FABRICOPS_METRICS_PORT", min=0, max=65535,
    help="Serve Prometheus /metrics on this port (0: off)")]
Seconds = Annotated[float, typer.Option(
    "--duration", min=0, help="Stop after this many wall seconds (0: run until stopped)")]
Retention = Annotated[str, typer.Option(
    "--retention", envvar="FABRICOPS_RETENTION",
    help="Delete telemetry older than this before now (or before the live streams' "
         "newest data, if older): 12h, 7d, 30d")]
Upkeep = Annotated[bool, typer.Option(
    "--upkeep/--no-upkeep", envvar="FABRICOPS_UPKEEP",
    help="Every --upkeep-every merge this pipeline's segments older than --merge-after "
         "and delete what is past --retention (off: leave both to a timer)")]
UpkeepEvery = Annotated[str, typer.Option(
    "--upkeep-every", envvar="FABRICOPS_UPKEEP_EVERY",
    help="Time between two upkeep passes (at least 10s): 10m, 1h")]
MergeAfter = Annotated[str, typer.Option(
    "--merge-after", envvar="FABRICOPS_MERGE_AFTER",
    help="Merge a span once it ended this long before its stream's newest data; later "
         "frames for it are written beside it: 1h, 10m, 0s")]


#: Where ``--metrics-port`` listens (every address, as Prometheus scrapes from outside).
METRICS_HOST = "0.0.0.0"


def checked_bus(kind: str, bootstrap: str) -> BusConfig:
    """The bus of ``--bus``/``--bootstrap``; with Kafka, a broker must answer now.

    Raises StartupError naming the flag."""
    if kind not in ("memory", "kafka"):
        raise StartupError(f"--bus {kind}: must be 'memory' or 'kafka'")
    if kind == "kafka":
        reachable_bootstrap(bootstrap)
    return BusConfig.model_validate({"kind": kind, "bootstrap_servers": bootstrap})


def checked_retention(text: str) -> float:
    """Seconds of ``--retention`` (at least an hour); StartupError naming the flag."""
    return checked_duration(text, "--retention", at_least="1h")


def checked_duration(text: str, option: str, at_least: str = "") -> float:
    """Seconds of a duration option (at least the duration ``at_least``, if given);
    StartupError naming it."""
    from fabricops.cli.query import parse_duration

    try:
        return parse_duration(text, option, at_least)
    except ValueError as exc:
        raise StartupError(str(exc)) from None


def start_bus(running: Running, config: BusConfig) -> Bus:
    """A started bus of ``config``, its metrics on the command's registry."""
    bus = make_bus(config, running.registry)
    bus.start()
    running.started(bus.stop)
    return bus


def start_metrics(running: Running, port: int) -> str:
    """Serve the registry's /metrics on ``port`` (checked free: ``free_port``); 0: off.
    Returns the words for the start-up line."""
    if not port:
        return "no metrics port"
    with named("--metrics-port", port):
        server, _ = start_http_server(port, addr=METRICS_HOST, registry=running.registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()

    running.started(stop)
    return f"metrics on :{port}/metrics"


#: The environment variable a gNMI password is read from (never a command-line flag).
GNMI_PASSWORD_ENV = "FABRICOPS_GNMI_PASSWORD"

GnmiTlsCert = Annotated[Path | None, typer.Option(
    "--gnmi-tls-cert", envvar="FABRICOPS_GNMI_TLS_CERT", show_default=False,
    help="Serve gNMI over TLS with this PEM certificate chain (with --gnmi-tls-key)")]
GnmiTlsKey = Annotated[Path | None, typer.Option(
    "--gnmi-tls-key", envvar="FABRICOPS_GNMI_TLS_KEY", show_default=False,
    help="PEM private key of --gnmi-tls-cert")]
GnmiSelfSigned = Annotated[bool, typer.Option(
    "--gnmi-tls-self-signed", envvar="FABRICOPS_GNMI_TLS_SELF_SIGNED",
    help="Serve gNMI over TLS with a self-signed certificate made (or kept) in the data "
         "folder; clients trust its gnmi-target.crt")]
GnmiUsername = Annotated[str | None, typer.Option(
    "--gnmi-username", envvar="FABRICOPS_GNMI_USERNAME", show_default=False,
    help=f"Require this username and a password on every gNMI RPC. The password comes from "
         f"${GNMI_PASSWORD_ENV} or --gnmi-password-file, never from the command line, where "
         f"other users of the machine can read it")]
GnmiPasswordFile = Annotated[Path | None, typer.Option(
    "--gnmi-password-file", envvar="FABRICOPS_GNMI_PASSWORD_FILE", show_default=False,
    help=f"File whose first line is the gNMI password (keep it mode 0600); else "
         f"${GNMI_PASSWORD_ENV}")]


@dataclass(frozen=True)
class GnmiSecurity:
    """How the simulated gNMI target is secured: TLS files and the login, each optional."""

    cert_file: Path | None = None
    key_file: Path | None = None
    username: str | None = None
    password: str | None = None

    def target_fields(self) -> dict[str, object]:
        """The ``GnmiTargetConfig`` fields (unset ones left out)."""
        fields = {"tls_cert_file": self.cert_file, "tls_key_file": self.key_file,
                  "username": self.username, "password": self.password}
        return {k: v for k, v in fields.items() if v is not None}

    def credentials(self) -> dict[str, object]:
        """The inventory's ``gnmi`` credentials that reach such a target: TLS verified
        against the served certificate itself, and the login."""
        out: dict[str, object] = {}
        if self.cert_file is not None:
            out |= {"insecure": False, "ca_file": self.cert_file.resolve()}
        if self.username is not None:
            out |= {"username": self.username, "password": self.password}
        return out

    def secure(self, inventory: Inventory) -> Inventory:
        """``inventory`` with ``credentials`` on every gNMI target (validated again)."""
        creds = self.credentials()
        if not creds:
            return inventory
        targets = [t if t.protocol != "gnmi" else t.model_copy(update={
            "gnmi": GnmiCredentials.model_validate({**t.gnmi.model_dump(), **creds})})
            for t in inventory.targets]
        return inventory.model_copy(update={"targets": targets})

    def describe(self) -> str:
        """Words for the start-up line."""
        tls = f"TLS ({self.cert_file})" if self.cert_file else "plain text"
        return tls + (f", login {self.username}" if self.username else "")


def checked_gnmi_security(*, cert: Path | None, key: Path | None, self_signed: bool,
                          username: str | None, password_file: Path | None, data_dir: Path,
                          hosts: Sequence[str] = ()) -> GnmiSecurity:
    """The gNMI options checked and read: TLS from the given files, or a self-signed pair
    in ``data_dir`` naming ``hosts``; the password from the file or the environment.

    Raises StartupError naming the flag."""
    if (cert is None) != (key is None):
        raise StartupError("--gnmi-tls-cert and --gnmi-tls-key go together")
    if self_signed and cert is not None:
        raise StartupError("--gnmi-tls-self-signed: give it or --gnmi-tls-cert, not both")
    if cert is not None and key is not None:
        _check_pem(cert, key)
    elif self_signed:
        from fabricops.simulator.agents.gnmi_selfsigned import self_signed_pair

        with named("--gnmi-tls-self-signed into", data_dir):
            cert, key = self_signed_pair(data_dir, hosts)
    password = _password(password_file)
    if username is None and password is not None:
        raise StartupError(f"a gNMI password (${GNMI_PASSWORD_ENV} or --gnmi-password-file) "
                           "needs --gnmi-username")
    if username is not None and not password:
        raise StartupError(f"--gnmi-username {username}: needs a password in "
                           f"${GNMI_PASSWORD_ENV} or --gnmi-password-file")
    return GnmiSecurity(cert, key, username, password)


def _password(file: Path | None) -> str | None:
    if file is None:
        return os.environ.get(GNMI_PASSWORD_ENV) or None
    with named("--gnmi-password-file", file):
        lines = file.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0]:
        raise StartupError(f"--gnmi-password-file {file}: the first line is empty")
    return lines[0]


def _check_pem(cert: Path, key: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    with named("--gnmi-tls-cert", cert):
        try:
            x509.load_pem_x509_certificate(cert.read_bytes())
        except ValueError:
            raise StartupError(f"--gnmi-tls-cert {cert}: not a PEM certificate") from None
    with named("--gnmi-tls-key", key):
        try:
            serialization.load_pem_private_key(key.read_bytes(), password=None)
        except (ValueError, TypeError):
            raise StartupError(f"--gnmi-tls-key {key}: not an unencrypted PEM private "
                               "key") from None
