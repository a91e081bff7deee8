"""From a topology to a RoCE plan: pick a template, fill the intent, resolve it per device.

``plan_fabric(topo, overrides)`` is the whole contract. The template is chosen from
what the topology shows: switch tiers, link speeds, leaf oversubscription, cable
lengths and the NIC model. Where the topology does not give a value, the defaults
are stated here and in ``TemplateChoice.reasons``:

- cable lengths: ``params.cable_length_m`` of the topology, either one number for
  every link or a mapping from link id or tier (``host-leaf``, ``leaf-spine``,
  ``leaf-agg``, ``agg-core``) to metres; otherwise 3 m host-leaf (DAC), 50 m
  leaf-spine and leaf-agg, 100 m agg-core (optics);
- NIC model: ``params.nic_model``; unknown means generic mlx5 DCQCN defaults;
- ECN: marking from ``rate x 12 us`` of queue (150 KB at 100G) to ten times that,
  10 % probability; halved thresholds when leaves are oversubscribed, because their
  uplinks are then the expected congestion point.

Overrides (``--set``) are applied to the intent before it is validated; they take a
short name from ``ALIASES`` or a dotted path into ``FabricIntent``. A bad value or
rule violation raises ``PlanError`` with one line naming the setting.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fabricops.config.devices import HostIntent, Nic, SwitchIntent, SwitchPort
from fabricops.config.headroom import headroom_bytes
from fabricops.config.intent import FabricIntent, HeadroomPolicy
from fabricops.core.topology import Node, NodeRole, Topology

#: Short ``--set`` names and the intent paths they set (one name may set several).
ALIASES: dict[str, tuple[str, ...]] = {
    "mtu": ("mtu_bytes",),
    "trust": ("qos.trust",),
    "lossless_priority": ("qos.lossless_priority",),
    "roce_dscp": ("qos.roce_dscp",),
    "cnp_priority": ("qos.cnp_priority",),
    "cnp_dscp": ("qos.cnp_dscp",),
    "pfc": ("pfc.enabled",),
    "watchdog_detection_ms": ("pfc.watchdog.detection_ms",),
    "watchdog_restoration_ms": ("pfc.watchdog.restoration_ms",),
    "load_balancing": ("ecmp.load_balancing",),
    "ecn_probability_pct": ("ecn_profiles.*.mark_probability_pct",),
    "ecn_min_threshold_bytes": ("ecn_profiles.*.min_threshold_bytes",),
    "ecn_max_threshold_bytes": ("ecn_profiles.*.max_threshold_bytes",),
    "pfc_response_ns": ("headroom.pfc_response_ns",),
    "switch_buffer_bytes": ("headroom.switch_buffer_bytes",),
}

_ECN_MIN_S = 12e-6
_ECN_MAX_OVER_MIN = 10
_ECN_PROBABILITY_PCT = 10
_MLX5_FAMILIES = ("connectx", "bluefield", "mlx5")


class PlanError(ValueError):
    """A topology or override that cannot make a valid plan; the message names it."""


class TemplateChoice(BaseModel):
    """The template a topology selected, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    tiers: tuple[str, ...] = Field(description="Switch roles present, lowest first")
    speeds_bps: tuple[int, ...]
    oversubscription: float = Field(description="Worst leaf down/up capacity ratio")
    nic_model: str | None
    reasons: tuple[str, ...]


class FabricPlan(BaseModel):
    """A template, the fabric intent and every device's resolved intent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    template: TemplateChoice
    fabric: FabricIntent
    switches: tuple[SwitchIntent, ...]
    hosts: tuple[HostIntent, ...]


_TIER_ORDER = (NodeRole.LEAF, NodeRole.AGG, NodeRole.SPINE, NodeRole.CORE, NodeRole.SWITCH)


def plan_fabric(topo: Topology, overrides: dict[str, Any] | None = None) -> FabricPlan:
    """The RoCE plan of ``topo`` with ``overrides`` (``--set`` values) applied."""
    choice = choose_template(topo)
    doc = default_intent(topo, choice).model_dump(mode="json")
    for key, value in (overrides or {}).items():
        _apply(doc, key, value)
    try:
        fabric = FabricIntent.model_validate(doc)
    except ValidationError as exc:
        raise PlanError(_one_line(exc)) from None
    try:
        switches = tuple(_switch(topo, node, fabric) for node in topo.switches())
        hosts = tuple(_host(topo, node, fabric, choice.nic_model) for node in topo.hosts())
    except ValidationError as exc:
        raise PlanError(_one_line(exc)) from None
    return FabricPlan(template=choice, fabric=fabric, switches=switches, hosts=hosts)


def choose_template(topo: Topology) -> TemplateChoice:
    """Pick the template from the topology's tiers, speeds, oversubscription and NIC."""
    roles = {n.role for n in topo.switches()}
    tiers = tuple(r.value for r in _TIER_ORDER if r in roles)
    speeds = tuple(sorted({p.speed_bps for n in topo.nodes for p in n.ports}))
    if not tiers or not speeds:
        raise PlanError(f"topology {topo.name!r} has no switches or no ports to configure")
    ratio = _oversubscription(topo)
    nic = topo.params.get("nic_model")
    nic_model = str(nic) if nic else None
    top = f"{max(speeds) / 1e9:g}g"
    name = f"roce-lossless-{len(tiers)}tier-{top}" + ("-rail" if "rail" in topo.kind else "")
    if ratio > 1:
        name += f"-os{ratio:g}"
    cables = topo.params.get("cable_length_m")
    reasons = (
        f"{len(tiers)} switch tier(s): {', '.join(tiers)}; one hash seed per tier",
        "link speeds " + ", ".join(f"{s / 1e9:g}G" for s in speeds) + ": one ECN profile each",
        f"leaf oversubscription {ratio:g}:1: "
        + ("ECN thresholds halved (uplinks congest first)" if ratio > 1
           else "non-blocking, standard ECN thresholds"),
        "cable lengths from the topology (params.cable_length_m)" if cables is not None
        else "cable lengths: tier defaults " + ", ".join(
            f"{m:g} m {tier}" for tier, m in HeadroomPolicy().cable_m_by_tier.items()
            if tier in ("host-leaf", "leaf-spine", "agg-core")),
        "NIC model unknown: generic mlx5 DCQCN defaults" if nic_model is None
        else f"NIC model {nic_model}: mlx5 DCQCN defaults" if is_mlx5(nic_model)
        else f"NIC model {nic_model}: not mlx5; generic DCQCN values, no host render",
    )
    return TemplateChoice(name=name, tiers=tiers, speeds_bps=speeds, oversubscription=ratio,
                          nic_model=nic_model, reasons=reasons)


def default_intent(topo: Topology, choice: TemplateChoice) -> FabricIntent:
    """The template's fabric intent before overrides."""
    scale = 0.5 if choice.oversubscription > 1 else 1.0
    profiles = []
    for speed in choice.speeds_bps:
        low = max(round(speed * _ECN_MIN_S / 8 * scale / 1000) * 1000, 16_000)
        profiles.append({"speed_bps": speed, "min_threshold_bytes": low,
                         "max_threshold_bytes": low * _ECN_MAX_OVER_MIN,
                         "mark_probability_pct": _ECN_PROBABILITY_PCT})
    return FabricIntent.model_validate({"name": topo.name, "ecn_profiles": profiles})


def is_mlx5(nic_model: str | None) -> bool:
    """True when ``nic_model`` is unknown or an NVIDIA/Mellanox (mlx5 driver) NIC."""
    return nic_model is None or nic_model.replace(" ", "").lower().startswith(_MLX5_FAMILIES)


def _oversubscription(topo: Topology) -> float:
    """Worst leaf ratio of host-facing to switch-facing capacity (1.0 without leaves)."""
    worst = 1.0
    for node in topo.switches():
        if node.role is not NodeRole.LEAF:
            continue
        down = up = 0
        for port in node.ports:
            peer = topo.peer_of.get(f"{node.id}:{port.name}")
            if peer is None:
                continue
            peer_node = topo.port_by_id[peer][0]
            if peer_node.is_host:
                down += port.speed_bps
            else:
                up += port.speed_bps
        if up:
            worst = max(worst, round(down / up, 2))
    return worst


def tier_of_link(a: Node, b: Node) -> str:
    """The tier name of a link between nodes ``a`` and ``b`` (``host-leaf``, ...)."""
    order = {NodeRole.HOST: 0, NodeRole.LEAF: 1, NodeRole.AGG: 2, NodeRole.SPINE: 3,
             NodeRole.CORE: 4, NodeRole.SWITCH: 5}
    low, high = sorted((a.role, b.role), key=order.__getitem__)
    if low is NodeRole.HOST:
        return "host-leaf"
    if NodeRole.SWITCH in (low, high):
        return "switch-switch"
    return f"{low.value}-{high.value}"


def _cable_m(topo: Topology, fabric: FabricIntent, port_id: str, peer: str) -> float:
    """Length of the cable on ``port_id``: topology value, else the tier default."""
    a = topo.port_by_id[port_id][0]
    b = topo.port_by_id[peer][0]
    tier = tier_of_link(a, b)
    given = topo.params.get("cable_length_m")
    if isinstance(given, dict):
        link = topo.link_of_port(port_id)
        given = given.get(link, given.get(tier))
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, int | float) or given <= 0:
            raise PlanError(f"{port_id}: topology params.cable_length_m gives {given!r}; "
                            "a cable length is a positive number of metres")
        return float(given)
    defaults = fabric.headroom.cable_m_by_tier
    return float(defaults.get(tier, defaults.get("switch-switch", 50.0)))


def _switch(topo: Topology, node: Node, fabric: FabricIntent) -> SwitchIntent:
    ports = []
    for port in node.ports:
        pid = f"{node.id}:{port.name}"
        peer = topo.peer_of.get(pid)
        if peer is None:
            continue
        cable = _cable_m(topo, fabric, pid, peer)
        room = headroom_bytes(speed_bps=port.speed_bps, mtu_bytes=fabric.mtu_bytes,
                              cable_m=cable, response_ns=fabric.headroom.pfc_response_ns)
        try:
            ecn = fabric.ecn_for(port.speed_bps)
        except ValueError as exc:
            raise PlanError(f"{pid}: {exc}") from None
        ports.append(SwitchPort(name=port.name, speed_bps=port.speed_bps, peer=peer,
                                cable_m=cable, headroom_bytes=room, ecn=ecn))
    tier = node.role.value
    seeds = fabric.ecmp.tier_seeds
    if tier not in seeds:
        raise PlanError(f"{node.id}: ecmp.tier_seeds has no seed for tier {tier!r}")
    budget = int(fabric.headroom.switch_buffer_bytes * fabric.headroom.max_headroom_share)
    return SwitchIntent(
        device=node.id, role=node.role.value, tier=tier, hash_seed=seeds[tier],
        hash_fields=fabric.ecmp.hash_fields, load_balancing=fabric.ecmp.load_balancing,
        mtu_bytes=fabric.mtu_bytes, qos=fabric.qos, pfc=fabric.pfc,
        headroom_budget_bytes=budget, ports=tuple(ports))


def _host(topo: Topology, node: Node, fabric: FabricIntent, nic_model: str | None) -> HostIntent:
    nics = []
    for index, port in enumerate(node.ports):
        pid = f"{node.id}:{port.name}"
        peer = topo.peer_of.get(pid)
        cable = _cable_m(topo, fabric, pid, peer) if peer else \
            fabric.headroom.cable_m_by_tier.get("host-leaf", 3.0)
        nics.append(Nic(name=port.name, speed_bps=port.speed_bps, peer=peer, cable_m=cable,
                        rdma_device=f"mlx5_{index}"))
    return HostIntent(device=node.id, nic_model=nic_model, mtu_bytes=fabric.mtu_bytes,
                      qos=fabric.qos, pfc=fabric.pfc, dcqcn=fabric.dcqcn, nics=tuple(nics))


def _apply(doc: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key`` (an alias or a dotted path; ``*`` means every list item) in ``doc``."""
    for path in ALIASES.get(key, (key,)):
        _set_path(doc, path.split("."), value, key)


def _set_path(node: Any, parts: list[str], value: Any, key: str) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        if not rest:
            raise PlanError(f"--set {key}: a list cannot be set as a whole")
        for item in node if head == "*" else [_list_item(node, head, key)]:
            _set_path(item, rest, value, key)
        return
    if not isinstance(node, dict) or (head not in node and not _open_mapping(node)):
        known = ", ".join(sorted(ALIASES))
        raise PlanError(f"--set {key}: unknown setting; use a dotted path into the intent "
                        f"(see --json) or one of: {known}")
    if rest:
        _set_path(node[head], rest, value, key)
    else:
        node[head] = value


def _open_mapping(node: dict[str, Any]) -> bool:
    """True for dicts keyed by data (tiers), where a new key may be added."""
    return bool(node) and all(isinstance(v, int | float) for v in node.values())


def _list_item(items: list[Any], index: str, key: str) -> Any:
    if not index.isdigit() or int(index) >= len(items):
        raise PlanError(f"--set {key}: {index!r} is not an index below {len(items)}")
    return items[int(index)]


def _one_line(exc: ValidationError) -> str:
    """The first problems of a validation error, on one line."""
    parts = []
    for err in exc.errors()[:3]:
        where = ".".join(str(x) for x in err["loc"])
        msg = "unknown setting" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)

