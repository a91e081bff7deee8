"""``fabricops config``: plan the RoCE settings of a fabric and render them per platform."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from fabricops.cli.common import debug_enabled, fail, parse_assignments, stdout_console
from fabricops.config.devices import HostIntent, SwitchIntent
from fabricops.config.plan import ALIASES, FabricPlan, PlanError, plan_fabric
from fabricops.config.render import PLATFORMS, RenderError, platform, render_plan
from fabricops.core.topology import TopologyError, load_topology

app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="Plan the RoCE configuration of a fabric (lossless class, PFC and watchdog, ECN, "
         "buffer headroom, ECMP seeds, NIC DCQCN), render it for switches and hosts, "
         "check what the fabric runs, apply the plan, validate it with traffic and watch "
         "for drift.",
)

TopologyOpt = Annotated[Path, typer.Option(
    "--topology", "-t", metavar="FILE", show_default=False,
    help="Topology file (.json/.yaml), e.g. from 'fabricops sim topology build'. Its "
         "params may give cable_length_m (a number, or per link id or tier) and nic_model.")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", "-s", metavar="KEY=VALUE",
    help="Override one intent setting; repeat for more. Short names: "
         + ", ".join(ALIASES) + "; or a dotted path such as pfc.watchdog.detection_ms=300 "
         "or ecmp.tier_seeds.spine=29.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]


def _plan(topology: Path, settings: list[str] | None) -> FabricPlan:
    """Load the topology and plan it; bad input becomes one ``error:`` line and exit 2."""
    try:
        topo = load_topology(topology)
    except TopologyError as exc:
        if debug_enabled():
            raise
        cause = str(exc).removeprefix(f"{topology}: ")
        raise fail(f"--topology {topology}: {cause}") from None
    try:
        return plan_fabric(topo, parse_assignments(settings or []))
    except (PlanError, ValueError) as exc:
        if debug_enabled():
            raise
        raise fail(str(exc)) from None


plan_of = _plan
"""Load a topology and plan it (``--set`` applied); bad input exits 2 with one line."""


@app.command("plan")
def plan_cmd(topology: TopologyOpt, settings: SetOpt = None, as_json: JsonOpt = False) -> None:
    """Choose a RoCE template from a topology and show the intent for every device.

    The template follows the topology: switch tiers (one ECMP hash seed each),
    link speeds (one ECN profile each), leaf oversubscription, cable lengths
    (defaults 3 m host-leaf, 50 m leaf-spine, 100 m agg-core when the topology
    has none; they size the PFC headroom) and the NIC model (DCQCN defaults).

    Example, a 64-GPU leaf-spine with a 4200-byte MTU:

        fabricops sim topology build leaf_spine --set gpus=64 -o t.json
        fabricops config plan --topology t.json --set mtu=4200
    """
    plan = _plan(topology, settings)
    if as_json:
        typer.echo(json.dumps(plan.model_dump(mode="json"), indent=2))
        return
    console = stdout_console()
    print_plan(console, plan)


@app.command("render")
def render_cmd(
    topology: TopologyOpt,
    platform_name: Annotated[str, typer.Option(
        "--platform", "-p", metavar="NAME", show_default=False,
        help="What to write: " + "; ".join(f"{p.name} ({p.summary})"
                                           for p in PLATFORMS.values()) + ".")],
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR",
                                      help="Folder for one file per device.")] = Path("config"),
    settings: SetOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write each device's RoCE configuration for one platform, one file per device.

    Switch platforms (openconfig, sonic, eos, nvue) write every switch; 'host'
    writes every host's mlx5 script. Settings a platform cannot express are
    listed after the summary; set those on the devices by hand.

    Example, Arista EOS configurations for a 64-GPU leaf-spine:

        fabricops config render --topology t.json --platform eos --out cfg/
    """
    try:
        platform(platform_name)
    except RenderError:
        raise fail(f"--platform {platform_name}: unknown platform; known: "
                   + ", ".join(PLATFORMS)) from None
    plan = _plan(topology, settings)
    try:
        result = render_plan(plan, platform_name, out)
    except (RenderError, OSError) as exc:
        if debug_enabled():
            raise
        message = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else str(exc)
        raise fail(message) from None
    if as_json:
        typer.echo(json.dumps({
            "platform": result.platform, "template": plan.template.name,
            "out_dir": str(result.out_dir), "files": [str(f) for f in result.files],
            "not_rendered": list(result.not_rendered)}, indent=2))
        return
    names = [f.name for f in result.files]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]}"
    typer.echo(f"Wrote {len(names)} {result.platform} configuration(s) to {result.out_dir}/ "
               f"(template {plan.template.name}): {shown}")
    for gap in result.not_rendered:
        typer.echo(f"  not rendered for {result.platform}: {gap}")


def print_plan(console: Console, plan: FabricPlan) -> None:
    """The template and why, the fabric-wide intent and one row per group of devices.

    Devices with the same settings share a row (first..last of the group and a count),
    so the table stays short for any fabric size.
    """
    console.print(f"[bold]Template {plan.template.name}[/bold] for {plan.fabric.name}")
    for reason in plan.template.reasons:
        console.print(f"  - {reason}")
    table = Table(title="Fabric intent", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("setting", no_wrap=True)
    table.add_column("value")
    for setting, value in _fabric_rows(plan):
        table.add_row(setting, value)
    console.print(table)
    console.print(_device_table(plan))


def _fabric_rows(plan: FabricPlan) -> list[tuple[str, str]]:
    f = plan.fabric
    q, wd, rp = f.qos, f.pfc.watchdog, f.dcqcn.rp
    rows = [
        ("MTU", f"{f.mtu_bytes} bytes on every port and NIC"),
        ("classes", f"trust {q.trust.value}; DSCP {q.roce_dscp} -> TC {q.lossless_priority} "
                    f"(RoCE), DSCP {q.cnp_dscp} -> TC {q.cnp_priority} (CNP, strict), "
                    f"others -> TC {q.default_priority}"),
        ("PFC", f"no-drop on priority {q.lossless_priority}" if f.pfc.enabled
         else "off (lossy RoCE, ECN only)"),
        ("PFC watchdog", f"detect {wd.detection_ms} ms, restore {wd.restoration_ms} ms, "
                         f"{wd.action.value}, poll {wd.poll_interval_ms} ms"
         if wd.enabled and f.pfc.enabled else "off"),
    ]
    rows += [(f"ECN {p.speed_bps / 1e9:g}G",
              f"mark from {p.min_threshold_bytes / 1e3:g} KB to "
              f"{p.max_threshold_bytes / 1e3:g} KB, {p.mark_probability_pct} % at max")
             for p in f.ecn_profiles]
    h, e = f.headroom, f.ecmp
    rows += [
        ("headroom", f"2*L*5ns/m*R + R*{h.pfc_response_ns}ns + 2*MTU per port; budget "
                     f"{h.max_headroom_share:.0%} of {h.switch_buffer_bytes / 2**20:g} MiB"),
        ("ECMP", f"{e.load_balancing.value} on " + ", ".join(x.value for x in e.hash_fields)),
        ("hash seeds", ", ".join(f"{t}={s}" for t, s in e.tier_seeds.items()
                                 if t in plan.template.tiers)),
        ("DCQCN RP", f"cut every >= {rp.rate_reduce_period_us} us, alpha every "
                     f"{rp.alpha_update_period_us} us (g {rp.alpha_gain_1024}/1024), min "
                     f"{rp.min_rate_mbps} Mb/s, +{rp.ai_rate_mbps}/+{rp.hai_rate_mbps} Mb/s "
                     f"every {rp.rate_increase_period_us} us"),
        ("DCQCN NP", f"CNP DSCP {q.cnp_dscp} priority {q.cnp_priority}, >= "
                     f"{f.dcqcn.np.min_time_between_cnps_us} us apart per flow"),
    ]
    return rows


def _device_table(plan: FabricPlan) -> Table:
    table = Table(title="Devices", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("devices", "n", "role", "seed", "ports", "cable m", "KB/port", "budget"):
        table.add_column(name, justify="left" if name in ("devices", "role") else "right")
    groups: dict[tuple[str, ...], list[str]] = {}
    devices: list[SwitchIntent | HostIntent] = [*plan.switches, *plan.hosts]
    for device in devices:
        groups.setdefault(_row(device), []).append(device.device)
    for row, names in groups.items():
        span = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"
        table.add_row(span, str(len(names)), *row)
    return table


def _row(device: SwitchIntent | HostIntent) -> tuple[str, ...]:
    """Role, seed, ports, cables, headroom per port and share of the headroom budget."""
    if isinstance(device, HostIntent):
        speeds = sorted({n.speed_bps for n in device.nics})
        cables = sorted({n.cable_m for n in device.nics})
        return ("host", "-", _count(len(device.nics), speeds),
                ", ".join(f"{c:g}" for c in cables), "-", "-")
    speeds = sorted({p.speed_bps for p in device.ports})
    cables = sorted({p.cable_m for p in device.ports})
    rooms = sorted({p.headroom_bytes for p in device.ports}) or [0]
    span = f"{rooms[0] / 1e3:.0f}" + (f"-{rooms[-1] / 1e3:.0f}" if len(rooms) > 1 else "")
    share = f"{device.headroom_total_bytes / device.headroom_budget_bytes:.0%}"
    if not device.pfc.enabled:
        span = share = "-"
    return (device.role, str(device.hash_seed), _count(len(device.ports), speeds),
            ", ".join(f"{c:g}" for c in cables), span, share)


def _count(n: int, speeds: list[int]) -> str:
    return f"{n}x" + "/".join(f"{s / 1e9:g}G" for s in speeds)


from fabricops.cli import config_ops, config_twin  # noqa: E402,F401  (their commands)
