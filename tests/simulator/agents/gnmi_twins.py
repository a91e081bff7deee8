"""Twins behind a gNMI target for the conformance tests, and the values a client should
see: a scenario, a live twin on the wall clock that keeps every frame of leaf-0 it
published, and each leaf's value as its YANG type encodes it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from fabricops.cli.up import on_wall_clock
from fabricops.core.catalogue import CATALOGUE, Metric
from fabricops.core.frame import Frame
from fabricops.core.openconfig import OPENCONFIG, OPER_STATUS_NAMES, format_path
from fabricops.core.roce_settings import SettingValue
from fabricops.simulator.agents.board import FrameBoard
from fabricops.simulator.agents.driver import DriverConfig, SimulationDriver
from fabricops.simulator.agents.gnmi_running import MemorySettingsHandler
from fabricops.simulator.agents.gnmi_set import DriverSetHandler, RecordingSetHandler
from fabricops.simulator.agents.gnmi_target import GnmiTarget, GnmiTargetConfig
from fabricops.simulator.agents.gnmi_typed import DECIMAL64, ENUMERATION, UINT64, leaf_type
from fabricops.simulator.engine import Simulator
from fabricops.simulator.scenario import Scenario, build_simulator

USER, PASSWORD = "admin", "s3cret"


def scenario(tick_s: float) -> Scenario:
    """A 16-GPU leaf-spine whose one job streams without pause, ticking every ``tick_s``."""
    return Scenario.model_validate({
        "seed": 5, "tick_s": tick_s, "topology": {"builder": "leaf_spine", "params": {"gpus": 16}},
        "jobs": [{"hosts": 2, "placement": "random", "compute_s": 0.0,
                  "comm_bytes_per_nic": 1e15}]})


def secured(cert: tuple[Path, Path], **extra: Any) -> GnmiTargetConfig:
    """A target config with TLS (``cert``, ``key``) and the USER/PASSWORD login."""
    return GnmiTargetConfig(tls_cert_file=cert[0], tls_key_file=cert[1], username=USER,
                            password=SecretStr(PASSWORD), **extra)


class Switches(RecordingSetHandler):
    """A Set handler that also carries running settings (as the twin's does)."""

    def __init__(self, settings: dict[str, dict[str, SettingValue]]) -> None:
        super().__init__()
        self.memory = MemorySettingsHandler(settings)

    def running_settings(self, device: str) -> dict[str, SettingValue]:
        return self.memory.running_settings(device)

    def set_settings(self, device: str, values: Any) -> None:
        self.memory.set_settings(device, values)


def expected(metric: Metric, value: int | float, encoding: str) -> Any:
    """A leaf of ``metric`` holding ``value``, as a client decodes it in ``encoding``
    (``json``, ``json_ietf`` or ``proto``; JSON already parsed)."""
    code, digits = leaf_type(metric)
    if code == ENUMERATION:
        return OPER_STATUS_NAMES[int(value)]
    if code == UINT64:
        number = round(value)
        return str(number) if encoding == "json_ietf" else number
    if code == DECIMAL64:
        text = f"{value:.{digits}f}"
        return text if encoding == "json_ietf" else float(text)
    return value


def frame_leaves(frame: Frame, raw: np.ndarray, interface: str | None, under: str,
                 encoding: str) -> dict[str, Any]:
    """Every leaf of ``interface`` (an entity such as ``leaf-0:eth1``; None: every one)
    whose schema path starts with ``under``, by keyed path text, valued from ``raw`` (of
    ``frame``'s layout)."""
    out = {}
    floats = raw.view(np.float64)
    for i, (e, m) in enumerate(zip(frame.entity_idx.tolist(), frame.metric.tolist(),
                                   strict=True)):
        metric = CATALOGUE.by_id(m)
        path = metric.family.sources.openconfig_path or ""
        entity = frame.entities[e]
        if interface in (None, entity) and path.startswith(under) and ":" in entity:
            value = floats[i] if metric.kind.value == "gauge" else int(raw[i])
            leaf = format_path(OPENCONFIG.leaf_path(metric, entity.split(":", 1)[1]))
            out[leaf] = expected(metric, value, encoding)
    return out


@dataclass
class Live:
    """A twin ticking on the wall clock, and every frame of leaf-0 it published by stamp."""

    sim: Simulator
    target: GnmiTarget
    registry: CollectorRegistry
    frames: dict[int, np.ndarray] = field(default_factory=dict)
    layout: Frame | None = None

    def leaves(self, ts_ns: int, under: str, encoding: str,
               interface: str | None = "leaf-0:eth1") -> dict[str, Any]:
        """The leaves under ``under`` of the frame stamped ``ts_ns`` (KeyError if the twin
        published none with that stamp)."""
        assert self.layout is not None
        return frame_leaves(self.layout, self.frames[ts_ns], interface, under, encoding)


def live_twin(config: GnmiTargetConfig, tick_s: float, speed: float) -> Iterator[Live]:
    """A started twin serving leaf-0 with ``config``, its clock on the wall clock; stopped
    when the generator closes."""
    sim = build_simulator(on_wall_clock(scenario(tick_s)))
    board, registry = FrameBoard(), CollectorRegistry()
    driver = SimulationDriver(sim, board, DriverConfig(speed=speed))
    live = Live(sim, GnmiTarget(config, board, ["leaf-0"], DriverSetHandler(driver),
                                registry=registry), registry)

    def keep(s: Simulator) -> None:
        frame = next(f for f in s.frames() if f.device == "leaf-0")
        live.frames[frame.ts_ns] = frame.raw.copy()
        live.layout = frame

    driver.add_tick_hook(keep)
    driver.start()
    live.target.start()
    try:
        yield live
    finally:
        live.target.stop()
        driver.stop()
