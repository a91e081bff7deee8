"""Fabric-wide checks of the running RoCE configuration against a plan.

``check_fabric(plan, running)`` reads nothing: ``running`` is device -> settings (as
``fabricops.core.roce_settings`` keys them) for the devices that could be read, and
``unread`` names the others with the reason. Each check passes or fails per device
and port, with the setting, the value found and the value expected:

- ``intent``: every setting as the plan says (drift);
- ``lossless_priority``: both ends of every link, NICs included, have PFC on the
  lossless priority and on nothing else (an end that was not read, such as a NIC read
  only on its host, leaves the other end checked alone);
- ``ecn_with_pfc``: ECN is on wherever PFC is;
- ``ecn_range``: the lossless queue starts marking between ``ecn_min_us`` and
  ``ecn_max_us`` of line rate (so one frame is not marked, and ECN acts before PFC),
  stops below the switch buffer, above where it starts, with a probability in 1-100 %;
- ``headroom``: a port keeps at least the headroom its cable needs at its speed;
- ``mtu_link``: both ends of a link have the planned MTU (so the same one);
- ``hash_seeds``: no two switch tiers share an ECMP hash seed (equal seeds on
  consecutive tiers polarize).

Settings a device does not report are findings (``found`` is ``absent``), never
skipped silently; checks that need an unread device count it as not checked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from fabricops.config.devices import HostIntent, SwitchIntent
from fabricops.config.plan import FabricPlan
from fabricops.config.running import host_settings, switch_settings
from fabricops.core.roce_settings import SettingValue

CHECKS = ("intent", "lossless_priority", "ecn_with_pfc", "ecn_range", "headroom",
          "mtu_link", "hash_seeds")
ABSENT = "absent"


class CheckConfig(BaseModel):
    """Bounds of the range checks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ecn_min_us: float = Field(1.0, gt=0, description="Marking may start after this much "
                              "line-rate time of queue")
    ecn_max_us: float = Field(50.0, gt=0, description="...and must start before this much")


@dataclass(frozen=True)
class Finding:
    """One failed check on one setting of one device (port '' for the device itself)."""

    check: str
    device: str
    port: str
    setting: str
    found: str
    expected: str
    note: str = ""


@dataclass
class CheckReport:
    """What failed, how many items each check looked at, and what could not be read."""

    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CHECKS, 0))
    unread: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.findings

    def failed(self, check: str) -> int:
        return sum(1 for f in self.findings if f.check == check)

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.ok,
                "checks": {c: {"checked": self.checked[c], "failed": self.failed(c)}
                           for c in CHECKS},
                "findings": [f.__dict__ for f in self.findings],
                "unread": self.unread}


def _text(value: SettingValue | None) -> str:
    if value is None:
        return ABSENT
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if value != "" else "none"


class _Run:
    def __init__(self, plan: FabricPlan, running: Mapping[str, Mapping[str, SettingValue]],
                 config: CheckConfig, report: CheckReport) -> None:
        self.plan, self.running, self.cfg, self.report = plan, running, config, report

    def fail(self, check: str, device: str, port: str, setting: str,
             found: SettingValue | None, expected: str, note: str = "") -> None:
        self.report.findings.append(Finding(check, device, port, setting, _text(found),
                                            expected, note))

    def value(self, port_id: str, leaf: str) -> tuple[bool, SettingValue | None]:
        """(read, value) of a leaf of a switch port or NIC by port id."""
        device, name = port_id.split(":", 1)
        have = self.running.get(device)
        if have is None:
            return False, None
        key = f"ports.{name}.{leaf}"
        return True, have.get(key, have.get(f"nics.{name}.{leaf}"))

    def intent(self) -> None:
        devices: list[SwitchIntent | HostIntent] = [*self.plan.switches, *self.plan.hosts]
        for device in devices:
            have = self.running.get(device.device)
            if have is None:
                continue
            wanted = switch_settings(device) if isinstance(device, SwitchIntent) \
                else host_settings(device)
            for key, value in wanted.items():
                self.report.checked["intent"] += 1
                if have.get(key) != value:
                    port, _, leaf = key.partition(".")[2].partition(".") \
                        if key.startswith(("ports.", "nics.")) else ("", "", key)
                    self.fail("intent", device.device, port, leaf, have.get(key), _text(value))

    def links(self) -> None:
        for sw in self.plan.switches:
            for port in sw.ports:
                pid = f"{sw.device}:{port.name}"
                if port.peer is None or (port.peer < pid and port.peer.split(":")[0]
                                         in {s.device for s in self.plan.switches}):
                    continue  # each switch-switch link once, from its lower end
                self._pair("lossless_priority", "pfc_priorities", sw, pid, port.peer,
                           ",".join(map(str, sw.pfc_priorities)))
                self._pair("mtu_link", "mtu_bytes", sw, pid, port.peer, str(sw.mtu_bytes))

    def _pair(self, check: str, leaf: str, sw: SwitchIntent, a: str, b: str,
              expected: str) -> None:
        (read_a, va), (read_b, vb) = self.value(a, leaf), self.value(b, leaf)
        if not (read_a or read_b):
            return
        self.report.checked[check] += 1
        if _text(va) == _text(vb) == (expected or "none"):
            return
        for end, value, other, peer, read in ((a, va, vb, b, read_a), (b, vb, va, a, read_b)):
            if read and _text(value) != (expected or "none"):
                device, name = end.split(":", 1)
                seen = _text(other) if (read_b if end == a else read_a) else "not read"
                self.fail(check, device, name, leaf, value, expected or "none",
                          f"peer {peer} has {seen}")

    def switch_ports(self) -> None:
        buffer = self.plan.fabric.headroom.switch_buffer_bytes
        for sw in self.plan.switches:
            have = self.running.get(sw.device)
            if have is None:
                continue
            for port in sw.ports:
                base = f"ports.{port.name}."
                pfc = have.get(base + "pfc_priorities")
                ecn_on = have.get(base + "ecn.enabled")
                self.report.checked["ecn_with_pfc"] += 1
                if pfc and ecn_on is not True:
                    self.fail("ecn_with_pfc", sw.device, port.name, "ecn.enabled", ecn_on,
                              "true", f"PFC is on priority {pfc}")
                self._ecn_range(sw, port.name, port.speed_bps, have, buffer)
                if sw.pfc.enabled:
                    self.report.checked["headroom"] += 1
                    room = have.get(base + "headroom_bytes")
                    if not isinstance(room, int) or room < port.headroom_bytes:
                        self.fail("headroom", sw.device, port.name, "headroom_bytes", room,
                                  f">= {port.headroom_bytes}",
                                  f"{port.cable_m:g} m cable at {port.speed_bps / 1e9:g}G")

    def _ecn_range(self, sw: SwitchIntent, name: str, speed_bps: int,
                   have: Mapping[str, SettingValue], buffer: int) -> None:
        base = f"ports.{name}.ecn."
        self.report.checked["ecn_range"] += 1
        lo = round(speed_bps * self.cfg.ecn_min_us / 8e6)
        hi = round(speed_bps * self.cfg.ecn_max_us / 8e6)
        kmin, kmax = have.get(base + "min_threshold_bytes"), have.get(base + "max_threshold_bytes")
        pct = have.get(base + "mark_probability_pct")
        where = f"{self.cfg.ecn_min_us:g}-{self.cfg.ecn_max_us:g} us at {speed_bps / 1e9:g}G"
        if not isinstance(kmin, int) or not lo <= kmin <= hi:
            self.fail("ecn_range", sw.device, name, "ecn.min_threshold_bytes", kmin,
                      f"{lo}..{hi}", where)
        if not isinstance(kmax, int) or not isinstance(kmin, int) or not kmin < kmax <= buffer:
            self.fail("ecn_range", sw.device, name, "ecn.max_threshold_bytes", kmax,
                      f"above min, <= {buffer}", "switch buffer")
        if not isinstance(pct, int) or not 1 <= pct <= 100:
            self.fail("ecn_range", sw.device, name, "ecn.mark_probability_pct", pct, "1..100")

    def seeds(self) -> None:
        by_seed: dict[SettingValue, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        for sw in self.plan.switches:
            seed = self.running.get(sw.device, {}).get("hash_seed")
            if seed is not None:
                by_seed[seed][sw.tier].append(sw.device)
                self.report.checked["hash_seeds"] += 1
        for seed, tiers in by_seed.items():
            if len(tiers) < 2:
                continue
            names = sorted(tiers)
            for tier in names[1:]:
                for device in tiers[tier]:
                    first = tiers[names[0]][0]
                    self.fail("hash_seeds", device, "", "hash_seed", seed,
                              f"not the seed of tier {names[0]}",
                              f"{first} ({names[0]}) has {seed} too")


def check_fabric(plan: FabricPlan, running: Mapping[str, Mapping[str, SettingValue]],
                 unread: Mapping[str, str] | None = None,
                 config: CheckConfig | None = None) -> CheckReport:
    """Run every check (see the module docstring)."""
    report = CheckReport(unread=dict(unread or {}))
    run = _Run(plan, running, config or CheckConfig(), report)
    run.intent()
    run.links()
    run.switch_ports()
    run.seeds()
    return report


__all__ = ["CHECKS", "CheckConfig", "CheckReport", "Finding", "check_fabric"]
