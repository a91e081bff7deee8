"""The running RoCE configuration of the twin, which its physics obeys.

``RunningConfig`` holds, per port, the MTU, the PFC no-drop priorities, the PFC
headroom and the ECN profile of the lossless egress queue, and per switch the
ECMP hash seed (the router's). Devices read and write it by setting key
(:mod:`fabricops.core.roce_settings`): ``device_settings`` and ``set``.
``channels()`` folds it into per-channel arrays for a tick:

- MTU: a RoCE frame (``PhysicsConfig.packet_bytes``) larger than the MTU of either
  end of a channel (MTU counts the IP packet: the frame less 18 bytes of Ethernet
  header and FCS) is dropped there (``mtu_loss``);
- PFC: a channel pauses only if both ends have PFC on the priority RoCE travels on;
  otherwise what a pause would have held is dropped (``pfc_ok`` False);
- headroom: a paused channel whose receiving port keeps less headroom than the
  cable needs (``headroom_needed``) drops the shortfall while it pauses;
- ECN: marking follows each egress port's thresholds; a queue whose marking is off,
  or starts only above the PFC Xoff, never tells senders to slow down (``ecn_deaf``).

Factory values reproduce what the twin always modelled: MTU 9100, PFC on the lossless
priority, the physics' ECN thresholds, headroom exactly as the cable needs.
``SettingFaults`` writes the settings of faults that change configuration when they
start and puts back what they changed when they end.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from fabricops.core.faults import FaultType, SettingFault
from fabricops.core.roce_settings import (
    SettingError,
    SettingValue,
    check_value,
    port_keys,
    split_key,
)
from fabricops.core.topology import NodeRole
from fabricops.simulator.fabric import Fabric
from fabricops.simulator.faults import FaultSpec
from fabricops.simulator.physics import PhysicsConfig

F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
FACTORY_MTU_BYTES = 9100
PROPAGATION_NS_PER_M = 5.0
ETH_OVERHEAD_BYTES = 18
_CABLE_M = {"host-leaf": 3.0, "leaf-spine": 50.0, "leaf-agg": 50.0, "agg-core": 100.0}
_ORDER = {NodeRole.HOST: 0, NodeRole.LEAF: 1, NodeRole.AGG: 2, NodeRole.SPINE: 3,
          NodeRole.CORE: 4, NodeRole.SWITCH: 5}


@dataclass(frozen=True)
class ChannelSettings:
    """Per channel (and the dummy channel last): what the configuration does to it."""

    kmin: F64
    kmax: F64
    pmax: F64
    ecn_deaf: B
    pfc_ok: B
    mtu_loss: F64
    headroom_short: F64  # share of the needed headroom the receiving port lacks
    settle_kmin: F64  # where a queue settles: between these (see ``_settling``)
    settle_kmax: F64
    mark_kmin: F64  # marking thresholds; a NIC's own channel into the fabric never marks
    mark_kmax: F64

    def buffer_loss(self, pause: F64) -> F64:
        """Share of a channel's packets dropped for a pause it cannot take, or take in full."""
        unpaused = np.where(self.pfc_ok, 0.0, pause)
        overflow = np.where(self.pfc_ok, pause * self.headroom_short, 0.0)
        out: F64 = np.clip(unpaused + overflow, 0.0, 1.0)
        return out


class RunningConfig:
    """The twin's running configuration (see the module docstring)."""

    def __init__(self, fabric: Fabric, seeds: npt.NDArray[np.uint64], physics: PhysicsConfig,
                 lossless_priority: int, on_reroute: Callable[[], None]) -> None:
        self.fabric = fab = fabric
        self.physics = physics
        self.priority = lossless_priority
        self.seeds = seeds  # the router's array, shared
        self.on_reroute = on_reroute
        n = fab.n_ports
        self.mtu = np.full(n, FACTORY_MTU_BYTES, np.int64)
        self.pfc = np.full(n, 1 << lossless_priority, np.int64)
        self.ecn_on = np.ones(n, bool)
        self.kmin = np.full(n, int(physics.ecn_kmin_bytes), np.int64)
        self.kmax = np.full(n, int(physics.ecn_kmax_bytes), np.int64)
        self.pct = np.full(n, round(physics.ecn_pmax * 100), np.int64)
        self.cable_m = cable_lengths(fab)
        self.headroom = self.headroom_needed()
        self.version = 0
        self._cache: tuple[int, ChannelSettings] | None = None

    def headroom_needed(self) -> npt.NDArray[np.int64]:
        """Bytes of headroom each port's cable needs at its speed and MTU (IEEE 802.1Qbb)."""
        fab, resp = self.fabric, self.physics.pfc_response_ns
        link = np.maximum(fab.port_rx_ch, 0) // 2
        cable = np.where(fab.port_rx_ch >= 0, self.cable_m[link], 0.0)
        bits = (2 * cable * PROPAGATION_NS_PER_M + resp) * fab.port_speed_bps / 1e9
        return (np.ceil(np.round(bits / 8, 6)) + 2 * self.mtu).astype(np.int64)

    def device_settings(self, device: str) -> dict[str, SettingValue]:
        """Every setting of ``device`` by key; ValueError if it is not in the fabric."""
        fab = self.fabric
        if device not in fab.topology.node_by_id:
            raise ValueError(f"device {device!r} is not in this fabric")
        node = fab.node_index(device)
        out: dict[str, SettingValue] = {}
        host = bool(fab.node_is_host[node])
        if not host:
            out["hash_seed"] = int(self.seeds[fab.node_switch[node]] & np.uint64(0xFFFFFFFF))
        for p in fab.node_ports(node):
            name = fab.port_ids[p].split(":", 1)[1]
            values: list[SettingValue] = [int(self.mtu[p]), _mask_text(int(self.pfc[p]))]
            if not host:
                values += [int(self.headroom[p]), bool(self.ecn_on[p]), int(self.kmin[p]),
                           int(self.kmax[p]), int(self.pct[p])]
            out.update(zip(port_keys(name, nic=host), values, strict=False))
        return out

    def set(self, device: str, values: Mapping[str, object]) -> dict[str, SettingValue]:
        """Apply ``values`` to ``device`` all or nothing; return the previous values.

        ValueError (SettingError) names the first key that does not exist or whose
        value breaks its range; nothing is applied then.
        """
        current = self.device_settings(device)
        checked = {}
        for key, value in values.items():
            if key not in current:
                raise SettingError(f"{device}: setting {key!r} does not exist on this device")
            checked[key] = check_value(key, value)
        previous = {k: current[k] for k in checked}
        node = self.fabric.node_index(device)
        reroute = False
        for key, value in checked.items():
            if value != current[key] or key == "hash_seed":  # the seed may carry high bits
                reroute |= self._write(node, key, value)
        self.version += 1
        if reroute:
            self.on_reroute()
        return previous

    def _write(self, node: int, key: str, value: SettingValue) -> bool:
        fab = self.fabric
        interface, leaf = split_key(key)
        if interface is None:
            sw = fab.node_switch[node]
            changed = int(self.seeds[sw]) != int(value)
            self.seeds[sw] = np.uint64(int(value))
            return changed
        p = fab.port_index(f"{fab.node_ids[node]}:{interface}")
        if leaf == "pfc_priorities":
            self.pfc[p] = sum(1 << int(x) for x in str(value).split(",") if x)
        elif leaf == "ecn.enabled":
            self.ecn_on[p] = bool(value)
        else:
            array = {"mtu_bytes": self.mtu, "headroom_bytes": self.headroom,
                     "ecn.min_threshold_bytes": self.kmin, "ecn.max_threshold_bytes": self.kmax,
                     "ecn.mark_probability_pct": self.pct}[leaf]
            array[p] = int(value)
        return False

    def channels(self) -> ChannelSettings:
        """The per-channel arrays of the current configuration (cached until it changes)."""
        if self._cache is not None and self._cache[0] == self.version:
            return self._cache[1]
        fab, cfg = self.fabric, self.physics
        tx, rx = fab.ch_tx_port, fab.ch_rx_port
        bit = 1 << self.priority
        pfc_ok = ((self.pfc[tx] & bit) > 0) & ((self.pfc[rx] & bit) > 0)
        frame_ip = cfg.packet_bytes - ETH_OVERHEAD_BYTES
        mtu_loss = (np.minimum(self.mtu[tx], self.mtu[rx]) < frame_ip).astype(np.float64)
        need = self.headroom_needed()[rx]
        short = np.clip(1.0 - self.headroom[rx] / np.maximum(need, 1), 0.0, 1.0)
        switch_rx = ~fab.node_is_host[fab.port_node[rx]]
        kmin = np.where(self.ecn_on[tx], self.kmin[tx], np.inf).astype(np.float64)
        deaf = ~self.ecn_on[tx] | (kmin >= cfg.xoff_bytes)
        kmin_ch, kmax_ch = np.append(kmin, np.inf), np.append(self.kmax[tx].astype(float), np.inf)
        mark_kmin, mark_kmax = kmin_ch.copy(), kmax_ch.copy()
        mark_kmin[fab.slot_from_host] = mark_kmax[fab.slot_from_host] = np.inf
        out = ChannelSettings(
            kmin=kmin_ch, kmax=kmax_ch,
            pmax=np.append(self.pct[tx] / 100.0, 0.0), ecn_deaf=np.append(deaf, False),
            pfc_ok=np.append(pfc_ok, True), mtu_loss=np.append(mtu_loss, 0.0),
            headroom_short=np.append(np.where(switch_rx, short, 0.0), 0.0),
            **_settling(kmin_ch, kmax_ch, cfg), mark_kmin=mark_kmin, mark_kmax=mark_kmax)
        self._cache = (self.version, out)
        return out


def _settling(kmin: F64, kmax: F64, cfg: PhysicsConfig) -> dict[str, F64]:
    """Where queues settle: between the configured ECN thresholds where those are higher
    than the physics' own (up to Xoff), else where DCQCN keeps them anyway."""
    lo = np.clip(np.maximum(kmin, cfg.ecn_kmin_bytes), None, cfg.xoff_bytes)
    hi = np.clip(np.maximum(kmax, cfg.ecn_kmax_bytes), None, cfg.xoff_bytes)
    return {"settle_kmin": lo, "settle_kmax": np.maximum(hi, lo)}


def _mask_text(mask: int) -> str:
    return ",".join(str(p) for p in range(8) if mask >> p & 1)


def cable_lengths(fab: Fabric) -> F64:
    """Metres of every link: the topology's ``params.cable_length_m`` (a number, or per
    link id or tier), else 3 m host-leaf, 50 m leaf-spine and leaf-agg, 100 m agg-core."""
    topo = fab.topology
    given: Any = topo.params.get("cable_length_m")
    out = np.zeros(fab.n_links)
    for i, link_id in enumerate(fab.link_ids):
        link = topo.link_by_id[link_id]
        a, b = topo.port_by_id[link.a][0], topo.port_by_id[link.b][0]
        low, high = sorted((a.role, b.role), key=_ORDER.__getitem__)
        tier = "host-leaf" if low is NodeRole.HOST else f"{low.value}-{high.value}"
        value = given.get(link_id, given.get(tier)) if isinstance(given, dict) else given
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        out[i] = float(value) if ok and value is not None else _CABLE_M.get(tier, 50.0)
    return out


class SettingFaults:
    """Writes the settings of configuration faults at their start, restores them at their end.

    Restoring puts back only values the fault wrote and nobody changed since.
    """

    def __init__(self, config: RunningConfig) -> None:
        self.config = config
        self._written: dict[int, list[tuple[str, dict[str, SettingValue],
                                            dict[str, SettingValue]]]] = {}
        self._ended: set[int] = set()

    def step(self, t_s: float, faults: Sequence[FaultSpec]) -> None:
        """Apply faults that have started by ``t_s``; restore those that have ended."""
        for i, spec in enumerate(faults):
            if not is_setting_fault(spec) or i in self._ended:
                continue
            if i not in self._written and spec.start_s <= t_s < spec.end_s():
                self._written[i] = [(d, values, self.config.set(d, values))
                                    for d, values in self.writes(spec).items()]
            elif i in self._written and t_s >= spec.end_s():
                self._ended.add(i)
                for device, values, previous in self._written[i]:
                    now = self.config.device_settings(device)
                    back = {k: v for k, v in previous.items() if now[k] == values[k]}
                    if back:
                        self.config.set(device, back)

    def writes(self, spec: FaultSpec) -> dict[str, dict[str, SettingValue]]:
        """Device -> the settings ``spec`` writes there."""
        cfg, fab, p = self.config, self.config.fabric, spec.typed_params()
        t = spec.type
        if t in (FaultType.ECN_MISCONFIG, SettingFault.ECN_THRESHOLD):
            ports = port_keys_of(fab, spec.entity)
            if t is SettingFault.ECN_THRESHOLD:
                leaf = {"ecn.min_threshold_bytes": p.min_threshold_bytes,
                        "ecn.max_threshold_bytes": p.max_threshold_bytes,
                        "ecn.mark_probability_pct": p.mark_probability_pct}
            elif p.mode == "aggressive":
                leaf = {"ecn.min_threshold_bytes": 0,
                        "ecn.max_threshold_bytes": cfg.physics.packet_bytes,
                        "ecn.mark_probability_pct": round(cfg.physics.ecn_pmax * 100)}
            else:
                leaf = {"ecn.enabled": False}
            return {spec.entity: {f"ports.{n}.{k}": v for n in ports for k, v in leaf.items()}}
        if t is SettingFault.HASH_SEED_EQUAL:
            seed = cfg.device_settings(spec.entity)["hash_seed"]
            return {d: {"hash_seed": seed} for d in (spec.entity, *switch_neighbours(
                fab, spec.entity))}
        link = fab.topology.link_by_id[spec.entity]
        end = link.a if p.end == "a" else link.b
        if t is SettingFault.HEADROOM_SHORT and fab.topology.port_by_id[end][0].is_host:
            end = link.b if end == link.a else link.a
        device, interface = end.split(":", 1)
        prefix = "nics" if fab.topology.port_by_id[end][0].is_host else "ports"
        if t is SettingFault.PFC_PRIORITY_MISMATCH:
            return {device: {f"{prefix}.{interface}.pfc_priorities": str(p.priority)}}
        if t is SettingFault.MTU_MISMATCH:
            return {device: {f"{prefix}.{interface}.mtu_bytes": p.mtu_bytes}}
        need = int(cfg.headroom_needed()[fab.port_index(end)])
        return {device: {f"ports.{interface}.headroom_bytes": int(need * p.share)}}


def is_setting_fault(spec: FaultSpec) -> bool:
    """True for faults that act by changing configuration."""
    return isinstance(spec.type, SettingFault) or spec.type is FaultType.ECN_MISCONFIG


def port_keys_of(fab: Fabric, device: str) -> list[str]:
    """Interface names of a device's cabled ports."""
    node = fab.node_index(device)
    return [fab.port_ids[p].split(":", 1)[1] for p in fab.node_ports(node)
            if fab.port_tx_ch[p] >= 0]


def switch_neighbours(fab: Fabric, device: str) -> list[str]:
    """Switches cabled to ``device``, in port order, each once."""
    topo = fab.topology
    out: list[str] = []
    for port in topo.node_by_id[device].ports:
        peer = topo.peer_of.get(f"{device}:{port.name}")
        if peer is not None:
            node = topo.port_by_id[peer][0]
            if not node.is_host and node.id not in out:
                out.append(node.id)
    return out


__all__ = ["ChannelSettings", "RunningConfig", "SettingFaults", "cable_lengths",
           "is_setting_fault"]
