"""``fabricops serve sim``: the simulated fabric on its own, for a deployment to watch.

The twin serves every switch over SNMP and gNMI on fixed ports, sends INT
reports to the collector, and writes what a real fabric's operator would
supply: the topology, the job placement and an inventory that names the
agents by an address other containers can reach (``--advertise``). A small
API on ``--api-port`` takes fault injections (``fabricops sim inject --api``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.sim_injector import SimFaultInjector
from fabricops.cli.common import stderr_console
from fabricops.cli.lifecycle import running_command, serve_until_stopped
from fabricops.cli.preflight import free_port, named
from fabricops.cli.serve_common import (
    GnmiPasswordFile,
    GnmiSecurity,
    GnmiSelfSigned,
    GnmiTlsCert,
    GnmiTlsKey,
    GnmiUsername,
    Seconds,
    checked_gnmi_security,
)
from fabricops.cli.up import live_scenario
from fabricops.cli.up_api import start_api
from fabricops.core.inventory import IntListener, Inventory, check_host_port
from fabricops.core.placement import save_placement
from fabricops.core.topology import save_topology
from fabricops.simulator.agents.gnmi_typed import Decimal64Proto
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.scenario import build_simulator


def serve_sim(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario YAML (default: the demo preset)")] = None,
    preset: Annotated[str | None, typer.Option("--preset", "-p", envvar="FABRICOPS_SIM_PRESET",
                                               help="A shipped scenario")] = None,
    speed: Annotated[float, typer.Option(min=0.01, help="Simulated seconds per wall second")]
    = 1.0,
    tick: Annotated[float | None, typer.Option(
        "--tick", min=0.001, max=60, help="Simulated seconds per twin tick (default: the "
        "scenario's; 0.1 resolves sub-second episodes such as a short PFC storm)")] = None,
    listen: Annotated[str, typer.Option(help="Address the agents listen on")] = "127.0.0.1",
    advertise: Annotated[str, typer.Option(
        help="Host name the inventory gives for the agents (default: --listen)")] = "",
    snmp_port: Annotated[int, typer.Option(min=0, max=65535, help="SNMP agent UDP port")]
    = 1161,
    gnmi_port: Annotated[int, typer.Option(min=0, max=65535, help="gNMI target TCP port")]
    = 50051,
    int_collector: Annotated[str, typer.Option(
        help="host:port the INT reports are sent to")] = "127.0.0.1:32766",
    int_listen: Annotated[str, typer.Option(
        help="host:port the inventory tells the INT collector to listen on")] = "",
    out: Annotated[Path, typer.Option(
        "--out", help="Folder for topology.json, jobs.yaml and inventory.yaml")]
    = Path("fabricops-data/sim"),
    api_port: Annotated[int, typer.Option(min=0, max=65535, help="Fault-injection API port")]
    = 8081,
    token: Annotated[str, typer.Option(envvar="FABRICOPS_API_TOKEN", show_default=False,
                                       help="Bearer token for fault injection")] = "",
    duration: Seconds = 0.0,
    gnmi_tls_cert: GnmiTlsCert = None,
    gnmi_tls_key: GnmiTlsKey = None,
    gnmi_tls_self_signed: GnmiSelfSigned = False,
    gnmi_username: GnmiUsername = None,
    gnmi_password_file: GnmiPasswordFile = None,
    gnmi_decimal64: Annotated[Decimal64Proto, typer.Option(
        "--gnmi-decimal64", help="How decimal64 leaves (optical power, temperature) go out "
        "with PROTO encoding: double_val, as gNMI 0.7 and later say, or decimal_val for "
        "clients built on older gNMI protos")] = Decimal64Proto.DOUBLE_VAL,
) -> None:
    """Run the simulated fabric for a deployment: agents on fixed ports, files for the
    other components, fault injection over HTTP.

    The gNMI target speaks plain text unless given TLS (--gnmi-tls-cert and
    --gnmi-tls-key, or --gnmi-tls-self-signed, which makes gnmi-target.crt in
    --out for the clients to trust) and a login (--gnmi-username, with the
    password in $FABRICOPS_GNMI_PASSWORD or --gnmi-password-file). The
    inventory it writes carries both (mode 0600 when it holds the password).

        fabricops serve sim --listen 0.0.0.0 --advertise sim --int-collector collector:32766
        FABRICOPS_GNMI_PASSWORD=... fabricops serve sim --gnmi-tls-self-signed --gnmi-username admin
    """
    console = stderr_console()
    with running_command() as running:
        with named("--int-collector", int_collector):
            collector_host, collector_port = check_host_port(int_collector).rsplit(":", 1)
        for flag, port, udp in (("--snmp-port", snmp_port, True),
                                ("--gnmi-port", gnmi_port, False),
                                ("--api-port", api_port, False)):
            if port:
                free_port(flag, listen, port, udp=udp)
        security = checked_gnmi_security(
            cert=gnmi_tls_cert, key=gnmi_tls_key, self_signed=gnmi_tls_self_signed,
            username=gnmi_username, password_file=gnmi_password_file, data_dir=out,
            hosts=(listen, advertise))
        sim = build_simulator(live_scenario(scenario, preset, tick))
        fabric = SimulatedFabric(sim, SimulatedFabricConfig.model_validate({
            "speed": speed, "host_telemetry": True,
            "snmp": {"host": listen, "port": snmp_port},
            "gnmi": {"host": listen, "port": gnmi_port, "decimal64": gnmi_decimal64,
                     **security.target_fields()},
            "int_exporter": {"collector_host": collector_host,
                             "collector_port": int(collector_port)}}))
        fabric.start()
        running.started(fabric.stop)
        api = start_api(running, ApiContext(
            config=ApiConfig.model_validate({"host": listen, "port": api_port, "token": token}),
            topology=sim.fabric.topology, registry=running.registry,
            injector=SimFaultInjector(fabric), liveness=running.liveness), "--api-port")
        written = _write_files(fabric, out, advertise or listen,
                               int_listen or f"0.0.0.0:{collector_port}", security)
        console.print(f"sim: {sim.fabric.topology.summary()} on {listen} (SNMP "
                      f":{fabric.snmp.port}, gNMI :{fabric.gnmi.port} {security.describe()}, "
                      f"INT to {int_collector}); "
                      f"fault injection on "
                      f"{api.url}; wrote {', '.join(str(p) for p in written)}")
        serve_until_stopped(running, duration)


def _write_files(fabric: SimulatedFabric, out: Path, advertise: str, int_listen: str,
                 security: GnmiSecurity) -> list[Path]:
    """Topology, placement and inventory, each written whole then renamed into place; an
    inventory holding a password is readable by its owner only."""
    out.mkdir(parents=True, exist_ok=True)
    sim = fabric.sim
    jobs = sim.placement()
    inventory = security.secure(_advertised(fabric.inventory(), advertise, int_listen))
    written = []
    for name, write in (
            ("topology.json", lambda p: save_topology(sim.fabric.topology, p)),
            ("jobs.yaml", lambda p: save_placement(jobs, p)),
            ("inventory.yaml", lambda p: p.write_text(yaml.safe_dump(
                inventory.model_dump(mode="json", exclude_defaults=True), sort_keys=False),
                encoding="utf-8"))):
        final = out / name
        partial = out / f".{final.stem}.partial{final.suffix}"
        if security.password is not None and name == "inventory.yaml":
            partial.unlink(missing_ok=True)
            partial.touch(mode=0o600)  # private before the password is written into it
        write(partial)
        partial.replace(final)
        written.append(final)
    return written


def _advertised(inventory: Inventory, host: str, int_listen: str) -> Inventory:
    targets = [t.model_copy(update={"address": f"{host}:{t.address.rsplit(':', 1)[1]}"})
               for t in inventory.targets]
    return inventory.model_copy(update={"targets": targets,
                                        "int": IntListener(listen=int_listen)})
