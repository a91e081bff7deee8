"""Template variables per platform: a device intent regrouped the way each syntax wants it.

Every function takes the plan and one of its device intents and returns the
dict a template in ``templates/`` renders; none reads files. A platform that cannot
express a setting either raises ``RenderError`` (the setting would be silently wrong)
or lists it in ``not_rendered`` (the device keeps its own value; the operator is told).
Names of hash fields per platform come from the vendors' published references:
SONiC ``SWITCH_HASH`` (sonic-buildimage Configuration.md), NVUE ``system forwarding
ecmp-hash``, EOS ``ip load-sharing trident fields``. Cable lengths given to platforms
that size headroom themselves (SONiC, NVUE) are whole metres, rounded up.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any

from fabricops.config.devices import HostIntent, SwitchIntent
from fabricops.config.intent import HashField, LoadBalancing, WatchdogAction
from fabricops.config.plan import FabricPlan, is_mlx5


class RenderError(ValueError):
    """An intent a platform's template cannot express; the message names both."""


SONIC_HASH = {HashField.SRC_IP: "SRC_IP", HashField.DST_IP: "DST_IP",
              HashField.IP_PROTOCOL: "IP_PROTOCOL", HashField.L4_SRC_PORT: "L4_SRC_PORT",
              HashField.L4_DST_PORT: "L4_DST_PORT",
              HashField.IPV6_FLOW_LABEL: "IPV6_FLOW_LABEL"}
NVUE_HASH = {HashField.SRC_IP: "source-ip", HashField.DST_IP: "destination-ip",
             HashField.IP_PROTOCOL: "ip-protocol", HashField.L4_SRC_PORT: "source-port",
             HashField.L4_DST_PORT: "destination-port",
             HashField.IPV6_FLOW_LABEL: "ipv6-label"}
EOS_HASH = {HashField.SRC_IP: "source-ip", HashField.DST_IP: "destination-ip",
            HashField.L4_SRC_PORT: "source-port", HashField.L4_DST_PORT: "destination-port"}


def _gbps(speed_bps: int) -> str:
    return f"{speed_bps / 1e9:g}G"


def _base(plan: FabricPlan, device: SwitchIntent | HostIntent) -> dict[str, Any]:
    return {"template": plan.template.name, "d": device, "qos": device.qos,
            "wd": device.pfc.watchdog, "not_rendered": []}


def _require_lb(platform: str, sw: SwitchIntent, allowed: tuple[LoadBalancing, ...]) -> None:
    if sw.load_balancing not in allowed:
        names = ", ".join(a.value for a in allowed)
        raise RenderError(f"{platform}: load_balancing={sw.load_balancing.value} is not in "
                          f"this template ({sw.device}); it renders {names}")


def _ecn_groups(sw: SwitchIntent, name: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One group per port speed: ``name`` formatted with the speed, its profile, its ports."""
    ports: dict[int, list[str]] = defaultdict(list)
    for port in sw.ports:
        ports[port.speed_bps].append(port.name)
    groups, profile_of = [], {}
    for speed in sorted(ports):
        label = name.format(speed=_gbps(speed))
        ecn = next(p.ecn for p in sw.ports if p.speed_bps == speed)
        groups.append({"name": label, "ecn": ecn, "ports": ports[speed]})
        profile_of.update(dict.fromkeys(ports[speed], label))
    return groups, profile_of


def _headroom_profiles(sw: SwitchIntent, name: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """One lossless buffer profile per (speed, cable) pair, with its xoff = headroom."""
    profiles: dict[str, dict[str, Any]] = {}
    buffer_of = {}
    for port in sw.ports:
        label = name.format(speed_mbps=port.speed_bps // 1_000_000, cable=_meters(port.cable_m),
                            xoff=port.headroom_bytes)
        profiles.setdefault(label, {"name": label, "xoff": port.headroom_bytes})
        buffer_of[port.name] = label
    return (list(profiles.values()) if sw.pfc.enabled else []), buffer_of


def _meters(value: float) -> str:
    """Whole metres, rounded up: platforms that size headroom themselves take integers."""
    return str(math.ceil(value))


def openconfig(plan: FabricPlan, sw: SwitchIntent) -> dict[str, Any]:
    """openconfig-qos classifiers, queues, schedulers, WRED/ECN and headroom buffers."""
    if sw.qos.trust != "dscp":
        raise RenderError(f"openconfig: trust={sw.qos.trust.value} cannot be expressed "
                          "(openconfig-qos classifiers match DSCP, not 802.1p); use dscp")
    ctx = _base(plan, sw)
    qos = sw.qos
    special = {qos.roce_dscp, qos.cnp_dscp}
    ctx["terms"] = [
        {"id": "roce", "group": "ROCE", "tc": qos.lossless_priority, "dscps": [qos.roce_dscp]},
        {"id": "cnp", "group": "CNP", "tc": qos.cnp_priority, "dscps": [qos.cnp_dscp]},
        {"id": "other", "group": "OTHER", "tc": qos.default_priority,
         "dscps": [v for v in range(64) if v not in special]},
    ]
    ctx["ecn_groups"], ctx["profile_of"] = _ecn_groups(sw, "ROCE_ECN_{speed}")
    ctx["buffer_profiles"], ctx["buffer_of"] = _headroom_profiles(sw, "ROCE_HEADROOM_{xoff}")
    gaps = []
    if sw.pfc.enabled:
        gaps.append("PFC no-drop priority (openconfig-qos has no PFC leaves)")
        if sw.pfc.watchdog.enabled:
            gaps.append("PFC watchdog (no OpenConfig model)")
    gaps.append("ECMP hash seed, hash fields and load-balancing mode (not in openconfig-qos)")
    wd = sw.pfc.watchdog
    ctx["unrendered_intent"] = {
        "pfc_no_drop_priorities": list(sw.pfc_priorities),
        "pfc_watchdog": ({"detection_ms": wd.detection_ms, "restoration_ms": wd.restoration_ms,
                          "action": wd.action.value} if sw.pfc.enabled and wd.enabled else None),
        "ecmp_hash_seed": sw.hash_seed,
        "ecmp_hash_fields": [f.value for f in sw.hash_fields],
        "load_balancing": sw.load_balancing.value,
    }
    ctx["not_rendered"] = gaps
    return ctx


def sonic(plan: FabricPlan, sw: SwitchIntent) -> dict[str, Any]:
    """SONiC config_db tables: maps, PORT_QOS_MAP, WRED, buffers, PFC watchdog, hash."""
    if sw.qos.trust != "dscp":
        raise RenderError(f"sonic: trust={sw.qos.trust.value} is not in this template "
                          "(it classifies with DSCP_TO_TC_MAP); use dscp")
    _require_lb("sonic", sw, (LoadBalancing.ECMP,))
    ctx = _base(plan, sw)
    ctx["dscp_to_tc"] = sorted(sw.qos.dscp_to_tc.items())
    ctx["identity"] = {str(i): str(i) for i in range(8)}
    ctx["hash_fields"] = [SONIC_HASH[f] for f in sw.hash_fields]
    ctx["ecn_groups"], ctx["profile_of"] = _ecn_groups(sw, "ROCE_ECN_{speed}")
    ctx["buffer_profiles"], ctx["buffer_of"] = _headroom_profiles(
        sw, "pg_lossless_{speed_mbps}_{cable}m_profile")
    return ctx


def eos(plan: FabricPlan, sw: SwitchIntent) -> dict[str, Any]:
    """EOS global maps and watchdog, one qos profile per speed, per-interface lines."""
    _require_lb("eos", sw, (LoadBalancing.ECMP,))
    ctx = _base(plan, sw)
    ctx["ecn_groups"], ctx["profile_of"] = _ecn_groups(sw, "ROCE-{speed}")
    ctx["ip_fields"] = [EOS_HASH[f] for f in sw.hash_fields if f in EOS_HASH]
    ctx["ipv6_fields"] = ctx["ip_fields"] + (
        ["flow-label"] if HashField.IPV6_FLOW_LABEL in sw.hash_fields else [])
    gaps = ["ECMP hash seed (the seed command differs by ASIC family)"]
    if HashField.IP_PROTOCOL in sw.hash_fields:
        gaps.append("ip_protocol hash field (not a 'fields ip' keyword)")
    ctx["not_rendered"] = gaps
    return ctx


def port_ranges(names: list[str]) -> str:
    """NVUE's interface list: ``[eth1, eth2, eth3, eth7]`` -> ``"eth1-3,eth7"``."""
    parts: list[str] = []
    run: list[tuple[str, int]] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        item = (match.group(1), int(match.group(2))) if match else None
        if run and (item is None or item != (run[-1][0], run[-1][1] + 1)):
            parts.append(_run_text(run))
            run = []
        if item is None:
            parts.append(name)
        else:
            run.append(item)
    if run:
        parts.append(_run_text(run))
    return ",".join(parts)


def _run_text(run: list[tuple[str, int]]) -> str:
    prefix, first = run[0]
    return f"{prefix}{first}" if len(run) == 1 else f"{prefix}{first}-{run[-1][1]}"


def nvue(plan: FabricPlan, sw: SwitchIntent) -> dict[str, Any]:
    """NVUE: RoCE mode, explicit maps, per-speed ECN and per-cable PFC profiles."""
    _require_lb("nvue", sw, (LoadBalancing.ECMP, LoadBalancing.ADAPTIVE))
    if sw.pfc.enabled and sw.pfc.watchdog.enabled \
            and sw.pfc.watchdog.action is WatchdogAction.FORWARD:
        raise RenderError("nvue: PFC watchdog action forward is not configurable "
                          "(Cumulus Linux discards on a pause storm); use drop")
    ctx = _base(plan, sw)
    ctx["ecn_groups"], _ = _ecn_groups(sw, "roce-ecn-{speed}")
    for group in ctx["ecn_groups"]:
        group["name"] = group["name"].lower()
    cables: dict[str, list[str]] = defaultdict(list)
    for port in sw.ports:
        cables[_meters(port.cable_m)].append(port.name)
    ctx["cable_groups"] = [{"name": f"roce-pfc-{m}m", "cable_m": m, "ports": names}
                           for m, names in sorted(cables.items(), key=lambda kv: int(kv[0]))]
    ctx["all_ports"] = [p.name for p in sw.ports]
    hosts = {h.device for h in plan.hosts}
    ctx["uplinks"] = [p.name for p in sw.ports
                      if p.peer and p.peer.split(":", 1)[0] not in hosts]
    ctx["hash_fields"] = [NVUE_HASH[f] for f in sw.hash_fields]
    return ctx


def host(plan: FabricPlan, h: HostIntent) -> dict[str, Any]:
    """mlx5 host: trust, DSCP->priority, PFC vector, DCQCN sysfs, RDMA-CM TOS."""
    if not is_mlx5(h.nic_model):
        raise RenderError(f"host: {h.device} has NIC model {h.nic_model!r}; this template "
                          "writes the mlx5 (NVIDIA ConnectX/BlueField) tools and sysfs only")
    ctx = _base(plan, h)
    ctx["pfc_vector"] = [int(p in h.pfc_priorities) for p in range(8)]
    ctx["rp"] = h.dcqcn.rp
    ctx["np"] = h.dcqcn.np
    return ctx
