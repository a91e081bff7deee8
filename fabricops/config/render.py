"""Write a plan's device intents as configuration for one platform, with Jinja2 templates.

``PLATFORMS`` is the explicit registry: a name, whether it configures switches or
hosts, its template in ``templates/``, the file suffix and the function that shapes
the template's variables (``contexts``). ``render_device`` returns one device's text;
``render_plan`` writes one file per device, ``<device>.<platform>.<suffix>``, into an
output folder and returns what it wrote and what the platform could not express.
JSON renders are parsed before they are written, so a broken template fails here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from jinja2 import Environment, PackageLoader, StrictUndefined

from fabricops.config import contexts
from fabricops.config.contexts import RenderError
from fabricops.config.devices import HostIntent, SwitchIntent
from fabricops.config.plan import FabricPlan

__all__ = ["PLATFORMS", "Platform", "RenderError", "RenderResult", "render_device",
           "render_plan"]


@dataclass(frozen=True)
class Platform:
    """One configuration dialect and how to fill its template."""

    name: str
    target: Literal["switch", "host"]
    template: str
    suffix: str
    context: Callable[[FabricPlan, Any], dict[str, Any]]
    summary: str


PLATFORMS: dict[str, Platform] = {
    "openconfig": Platform("openconfig", "switch", "openconfig.json.j2", "json",
                           contexts.openconfig, "openconfig-qos gNMI Set payload"),
    "sonic": Platform("sonic", "switch", "sonic.json.j2", "json", contexts.sonic,
                      "SONiC config_db.json fragment"),
    "eos": Platform("eos", "switch", "eos.cfg.j2", "cfg", contexts.eos, "Arista EOS CLI"),
    "nvue": Platform("nvue", "switch", "nvue.sh.j2", "sh", contexts.nvue,
                     "NVIDIA Cumulus Linux NVUE commands"),
    "host": Platform("host", "host", "host.sh.j2", "sh", contexts.host,
                     "mlx5 host script: mlnx_qos, ecn sysfs, cma_roce_tos"),
}


@dataclass(frozen=True)
class RenderResult:
    """What ``render_plan`` wrote."""

    platform: str
    out_dir: Path
    files: tuple[Path, ...]
    not_rendered: tuple[str, ...]


def _seconds(ms: int) -> str:
    """``200`` ms -> ``"0.2"`` (seconds, as EOS takes them)."""
    return f"{ms / 1000:g}"


def _meters(value: float) -> str:
    """Whole metres, rounded up (the cable length SONiC's CABLE_LENGTH takes)."""
    return str(math.ceil(value))


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("fabricops.config", "templates"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["seconds"] = _seconds
    env.filters["meters"] = _meters
    env.filters["ports"] = contexts.port_ranges
    return env


_ENV = _environment()
_PLURAL = {"switch": "switches", "host": "hosts"}


def platform(name: str) -> Platform:
    """The platform called ``name``; RenderError lists the known ones."""
    try:
        return PLATFORMS[name]
    except KeyError:
        known = ", ".join(PLATFORMS)
        raise RenderError(f"unknown platform {name!r}; known platforms: {known}") from None


def render_device(plan: FabricPlan, device: SwitchIntent | HostIntent,
                  platform_name: str) -> tuple[str, list[str]]:
    """The configuration text of ``device`` and the settings the platform leaves out."""
    spec = platform(platform_name)
    if device.kind != spec.target:
        raise RenderError(f"{spec.name} configures {_PLURAL[spec.target]}; {device.device} "
                          f"is a {device.kind}")
    ctx = spec.context(plan, device)
    text = _ENV.get_template(spec.template).render(**ctx)
    if spec.suffix == "json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RenderError(f"{spec.name}: template made invalid JSON for {device.device}: "
                              f"{exc}") from None
        text = json.dumps(doc, indent=2) + "\n"
    return text, list(ctx["not_rendered"])


def render_plan(plan: FabricPlan, platform_name: str, out_dir: Path) -> RenderResult:
    """Write every applicable device of ``plan`` for ``platform_name`` into ``out_dir``."""
    spec = platform(platform_name)
    devices: tuple[SwitchIntent | HostIntent, ...] = (
        plan.switches if spec.target == "switch" else plan.hosts)
    if not devices:
        raise RenderError(f"{spec.name} configures {_PLURAL[spec.target]} and the plan has none")
    rendered = [(d.device, *render_device(plan, d, spec.name)) for d in devices]
    out_dir.mkdir(parents=True, exist_ok=True)
    files, gaps = [], {}
    for device, text, missing in rendered:
        path = out_dir / f"{device}.{spec.name}.{spec.suffix}"
        path.write_text(text, encoding="utf-8")
        files.append(path)
        gaps.update(dict.fromkeys(missing))
    return RenderResult(spec.name, out_dir, tuple(files), tuple(gaps))

