"""``fabricops agent``: the host agent on a GPU server, publishing its NICs' counters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fabricops.agent.config import AgentConfig
from fabricops.agent.discovery import NoRdmaDevicesError
from fabricops.agent.service import HostAgent
from fabricops.cli.common import fail, stderr_console
from fabricops.cli.lifecycle import running_command, serve_until_stopped
from fabricops.cli.preflight import StartupError, free_port, named
from fabricops.cli.serve_common import (
    METRICS_HOST,
    Bootstrap,
    BusKind,
    MetricsPort,
    Seconds,
    checked_bus,
    start_bus,
    start_metrics,
)
from fabricops.collectors.policy import PolicyListener
from fabricops.core.busio import BusFrameSink


class _Printed:
    """A frame sink for ``--once``: frames as JSON on stdout."""

    def publish_frames(self, frames: object) -> None:
        for frame in frames:  # type: ignore[attr-defined]
            typer.echo(json.dumps(frame.to_json_dict(), indent=1))


def _nic_names(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not value:
            raise StartupError(f"--nic {pair}: expected DEVICE=NAME, e.g. mlx5_3=nic3")
        out[key] = value
    return out


def agent(
    root: Annotated[Path, typer.Option(
        "--root", help="Read /sys (and recorded ethtool/lldpcli outputs, see below) under this "
                       "directory instead of /")] = Path("/"),
    host: Annotated[str, typer.Option(
        "--host", envvar="FABRICOPS_HOST", help="This host's id in the topology "
                                                "(default: the short host name)")] = "",
    interval: Annotated[float, typer.Option(
        "--interval", min=0.01, help="Seconds between samples, until a sampling policy on "
                                     "control.v2 asks for another")] = 1.0,
    topology: Annotated[Path | None, typer.Option(
        "--topology", envvar="FABRICOPS_TOPOLOGY",
        help="Topology file: with LLDP (lldpd), names each NIC by the switch port it is "
             "cabled to")] = None,
    nic: Annotated[list[str] | None, typer.Option(
        "--nic", help="Name a NIC by hand: RDMA device, device/port or interface = NIC name "
                      "or entity id (repeat)")] = None,
    no_lldp: Annotated[bool, typer.Option("--no-lldp", help="Do not ask lldpd")] = False,
    no_optics: Annotated[bool, typer.Option("--no-optics", help="Skip ethtool -m")] = False,
    once: Annotated[bool, typer.Option(
        "--once", help="Print one sample as JSON and exit (no bus)")] = False,
    duration: Seconds = 0.0,
    bus_kind: BusKind = "kafka",
    bootstrap: Bootstrap = "127.0.0.1:9092",
    metrics_port: MetricsPort = 0,
) -> None:
    """Publish this GPU server's RoCE NIC counters: CNPs, retransmissions,
    out-of-sequence, per-priority PFC pause, link state and optics.

    The agent finds the RDMA devices in /sys/class/infiniband, reads their
    port counters and hw_counters (mlx5, bnxt_re), the interface's ethtool
    statistics and /sys/class/net state, names each NIC as the topology does
    (--topology with lldpd, --nic, or in order: nic0, nic1, ...), and
    publishes one frame per sample on telemetry.v2 (source "host").

    Check what it reads, on this host or on a recorded tree:

        fabricops agent --once --host gpu-017
        fabricops agent --root tests/agent/fixtures/mlx5 --host gpu-017 --once

    Run it next to the collectors:

        fabricops agent -b kafka-0:9092 --topology topology.json --metrics-port 9102

    A recorded tree (--root DIR) holds DIR/sys/class/infiniband/..., DIR/sys/class/net/...,
    the output of `ethtool -S IF` in DIR/ethtool/IF/statistics, of `ethtool -m IF` in
    DIR/ethtool/IF/module, and of `lldpcli -f json show neighbors` in
    DIR/lldp/neighbors.json.
    """
    console = stderr_console()
    with running_command() as running:
        if not root.is_dir():
            raise fail(f"--root {root}: no such directory")
        with named("--nic", nic):
            names = _nic_names(nic or [])
        if topology is not None and not topology.is_file():
            raise fail(f"--topology {topology}: no such file")
        config = AgentConfig(root=root, host=host, interval_s=interval, topology=topology,
                             nics=names, lldp=not no_lldp, optics=not no_optics)
        if once:
            one = HostAgent(config, _Printed(), running.registry)
            _discover(one)
            if one.collect() is None:
                raise fail("the sample failed (see the warning above)", 1)
            return
        bus_config = checked_bus(bus_kind, bootstrap)
        if metrics_port:
            free_port("--metrics-port", METRICS_HOST, metrics_port)
        bus = start_bus(running, bus_config)
        running.started(lambda: bus.flush(10.0))
        host_agent = HostAgent(config, BusFrameSink(bus), running.registry,
                               liveness=running.liveness)
        _discover(host_agent)
        host_agent.start()
        running.started(host_agent.stop)
        policies = PolicyListener(bus, [host_agent], group=f"fabricops-agent-{host_agent.host}",
                                  registry=running.registry, liveness=running.liveness)
        policies.start()
        running.started(policies.stop)
        words = start_metrics(running, metrics_port)
        nics = ", ".join(f"{p.nic.rdma.label}={p.nic.entity}" for p in host_agent.plans)
        console.print(f"agent {host_agent.host}: {nics}; every {interval:g} s to {bus_kind}; "
                      f"{words}")
        serve_until_stopped(running, duration)


def _discover(host_agent: HostAgent) -> None:
    """Discover now, so that a host without RDMA devices fails with one line."""
    try:
        host_agent.discover()
    except NoRdmaDevicesError as exc:
        raise fail(str(exc)) from None
