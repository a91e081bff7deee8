"""A plan's device intents as the settings devices run, keyed as ``core.roce_settings``.

``intended_settings(plan)`` is what every switch and host should report when it
runs the plan: per switch the hash seed of its tier and, per port, the MTU, the
no-drop priorities, the headroom the cable needs and the ECN profile of the
lossless queue; per host, each NIC's MTU and no-drop priorities. A lossy plan
(PFC off) has no no-drop priority and leaves headroom out (nothing uses it).

``changes(intended, running)`` is what must be written to make a device run its
intent: the intended values of every setting it runs differently, or lacks.
"""

from __future__ import annotations

from collections.abc import Mapping

from fabricops.config.devices import HostIntent, SwitchIntent
from fabricops.config.plan import FabricPlan
from fabricops.core.roce_settings import SettingValue

Settings = dict[str, SettingValue]


def _pfc(priorities: tuple[int, ...]) -> str:
    return ",".join(str(p) for p in sorted(priorities))


def switch_settings(sw: SwitchIntent) -> Settings:
    """The settings ``sw`` should run."""
    out: Settings = {"hash_seed": sw.hash_seed}
    for port in sw.ports:
        base = f"ports.{port.name}."
        out[base + "mtu_bytes"] = sw.mtu_bytes
        out[base + "pfc_priorities"] = _pfc(sw.pfc_priorities)
        if sw.pfc.enabled:
            out[base + "headroom_bytes"] = port.headroom_bytes
        out[base + "ecn.enabled"] = True
        out[base + "ecn.min_threshold_bytes"] = port.ecn.min_threshold_bytes
        out[base + "ecn.max_threshold_bytes"] = port.ecn.max_threshold_bytes
        out[base + "ecn.mark_probability_pct"] = port.ecn.mark_probability_pct
    return out


def host_settings(host: HostIntent) -> Settings:
    """The settings ``host``'s NICs should run."""
    out: Settings = {}
    for nic in host.nics:
        out[f"nics.{nic.name}.mtu_bytes"] = host.mtu_bytes
        out[f"nics.{nic.name}.pfc_priorities"] = _pfc(host.pfc_priorities)
    return out


def intended_settings(plan: FabricPlan) -> dict[str, Settings]:
    """Device -> the settings it should run (see the module docstring)."""
    out = {sw.device: switch_settings(sw) for sw in plan.switches}
    out.update({h.device: host_settings(h) for h in plan.hosts})
    return out


def changes(intended: Mapping[str, Mapping[str, SettingValue]],
            running: Mapping[str, Mapping[str, SettingValue]]) -> dict[str, Settings]:
    """Device -> the settings to write so it runs its intent; devices not in ``running``
    (not read) are left out, and so are devices already conforming."""
    out: dict[str, Settings] = {}
    for device, wanted in intended.items():
        have = running.get(device)
        if have is None:
            continue
        diff = {k: v for k, v in wanted.items() if have.get(k) != v}
        if diff:
            out[device] = diff
    return out


__all__ = ["Settings", "changes", "host_settings", "intended_settings", "switch_settings"]
