"""Where ``fabricops config`` reads running settings from, and how findings are shown.

Switches are read over gNMI: ``--gnmi HOST:PORT`` (one server for every switch, as
the twin serves them) or ``--inventory FILE`` (each switch's gNMI target). Hosts'
NIC settings are not served over gNMI: they are reported as not read (the host
script checks them on the host). Paths a device answers that name no setting, and
values out of range, are counted and shown, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from fabricops.cli.common import fail
from fabricops.collectors.gnmi_settings import GnmiSettingsClient, SettingsReadError
from fabricops.config.plan import FabricPlan
from fabricops.config.running import Settings
from fabricops.core.inventory import InventoryError, load_inventory

GnmiOpt = Annotated[str | None, typer.Option(
    "--gnmi", metavar="HOST:PORT", show_default=False,
    help="gNMI server of every switch (the twin: 'fabricops config twin' prints it).")]
InventoryOpt = Annotated[Path | None, typer.Option(
    "--inventory", "-i", metavar="FILE", show_default=False,
    help="Inventory whose gNMI targets give each switch's address and credentials.")]
HOST_UNREAD = "NIC settings are read on the host (mlnx_qos), not over gNMI"


@dataclass
class GnmiReader:
    """A SettingsReader over gNMI that remembers what it could not use."""

    client: GnmiSettingsClient
    hosts: frozenset[str]
    unmapped: list[tuple[str, str, str]] = field(default_factory=list)  # device, path, why

    def __call__(self, devices: list[str]) -> tuple[dict[str, Settings], dict[str, str]]:
        running: dict[str, Settings] = {}
        unread: dict[str, str] = {}
        for device in devices:
            if device in self.hosts:
                unread[device] = HOST_UNREAD
                continue
            try:
                parsed = self.client.read(device)
            except SettingsReadError as exc:
                unread[device] = str(exc)
                continue
            running[device] = parsed.values
            self.unmapped += [(device, p, why) for p, why in (*parsed.unmapped, *parsed.refused)]
        return running, unread


def gnmi_reader(plan: FabricPlan, gnmi: str | None, inventory: Path | None) -> GnmiReader:
    """The reader for ``--gnmi`` or ``--inventory``; exits 2 naming a missing option."""
    switches = [s.device for s in plan.switches]
    if gnmi and inventory:
        raise fail("give either --gnmi or --inventory, not both")
    if gnmi:
        addresses = dict.fromkeys(switches, gnmi)
    elif inventory:
        try:
            inv = load_inventory(inventory)
        except (InventoryError, OSError) as exc:
            raise fail(f"--inventory {inventory}: {exc}") from None
        addresses = {t.device: t.address for t in inv.by_protocol("gnmi")}
    else:
        raise fail("say where the switches are: --gnmi HOST:PORT (e.g. the twin of "
                   "'fabricops config twin') or --inventory FILE")
    client = GnmiSettingsClient(addresses)
    return GnmiReader(client, frozenset(h.device for h in plan.hosts))


def compress(names: list[str], limit: int = 3) -> str:
    """``a, b, c +4 more``: a list that stays one short cell."""
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")
