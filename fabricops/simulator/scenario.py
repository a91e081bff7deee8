"""Scenarios: a topology, jobs, faults, a duration and a tick, in one YAML document.

``load_scenario`` validates a file and names the bad field; ``build_simulator``
turns a scenario into a ready ``Simulator`` (jobs placed, faults checked
against the topology).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fabricops.core.topology import Topology, TopologyError, load_topology
from fabricops.core.yamlfile import read_yaml
from fabricops.simulator.builders import BuilderError, build
from fabricops.simulator.engine import SimConfig, Simulator
from fabricops.simulator.faults import FaultError, FaultSpec, parse_fault
from fabricops.simulator.workload import BackgroundSpec, JobSpec


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the file and the field."""


class TopologyRef(BaseModel):
    """Either a builder with parameters, or a topology file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    builder: str | None = Field(default=None, description="leaf_spine, fat_tree, rail_optimized")
    params: dict[str, Any] = Field(default_factory=dict)
    file: Path | None = None

    @model_validator(mode="after")
    def _one_source(self) -> TopologyRef:
        if (self.builder is None) == (self.file is None):
            raise ValueError("give exactly one of 'builder' or 'file'")
        return self


class Scenario(BaseModel):
    """One simulated run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "scenario"
    seed: int = Field(default=0, ge=0)
    duration_s: float = Field(default=60.0, gt=0)
    tick_s: float = Field(default=1.0, gt=0, le=60)
    topology: TopologyRef = Field(
        default_factory=lambda: TopologyRef(builder="leaf_spine", params={"gpus": 512})
    )
    sim: dict[str, Any] = Field(default_factory=dict, description="Other SimConfig fields")
    jobs: list[JobSpec] = Field(default_factory=list)
    background: BackgroundSpec | None = Field(default=None,
                                              description="Steady traffic outside the jobs")
    faults: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def ticks(self) -> int:
        return max(1, round(self.duration_s / self.tick_s))

    def config(self) -> SimConfig:
        return SimConfig.model_validate({**self.sim, "seed": self.seed, "tick_s": self.tick_s})


def with_tick(scenario: Scenario, tick_s: float | None) -> Scenario:
    """``scenario`` stepped every ``tick_s`` simulated seconds (None: its own tick).

    Its faults and jobs keep their times in seconds; ScenarioError names a tick
    out of range."""
    if tick_s is None:
        return scenario
    try:
        return Scenario.model_validate({**scenario.model_dump(), "tick_s": tick_s})
    except ValidationError as exc:
        raise ScenarioError(f"scenario {scenario.name!r}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
    got = "" if err["type"] == "missing" else f" (got {err['input']!r})"
    more = f"; and {exc.error_count() - 1} more" if exc.error_count() > 1 else ""
    return f"{loc}: {err['msg']}{got}{more}"


def scenario_from_dict(doc: Any, source: str = "scenario") -> Scenario:
    if not isinstance(doc, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping at the top level")
    try:
        return Scenario.model_validate(doc)
    except ValidationError as exc:
        raise ScenarioError(f"{source}: {_describe(exc)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML (or JSON) file."""
    p = Path(path)
    scenario = scenario_from_dict(read_yaml(p, "scenario", ScenarioError), str(p))
    ref = scenario.topology
    if ref.file is not None and not ref.file.is_absolute():
        scenario = scenario.model_copy(
            update={"topology": ref.model_copy(update={"file": p.parent / ref.file})}
        )
    return scenario


def preset_names() -> list[str]:
    """Names of the scenarios shipped with fabricops."""
    folder = resources.files("fabricops.simulator") / "presets"
    return sorted(e.name.removesuffix(".yaml") for e in folder.iterdir()
                  if e.name.endswith(".yaml"))


def load_preset(name: str) -> Scenario:
    """A shipped scenario by name; ScenarioError lists the known ones."""
    if name not in preset_names():
        raise ScenarioError(f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    text = (resources.files("fabricops.simulator") / "presets" / f"{name}.yaml").read_text()
    return scenario_from_dict(yaml.safe_load(text), f"preset {name}")


def scenario_topology(scenario: Scenario) -> Topology:
    ref = scenario.topology
    try:
        if ref.file is not None:
            return load_topology(ref.file)
        return build(str(ref.builder), **ref.params)
    except (BuilderError, TopologyError) as exc:
        raise ScenarioError(f"scenario {scenario.name!r}: topology: {exc}") from None


def build_simulator(scenario: Scenario, topology: Topology | None = None) -> Simulator:
    """A simulator with the scenario's jobs placed and faults injected."""
    topo = topology or scenario_topology(scenario)
    try:
        sim = Simulator(topo, scenario.config())
    except ValidationError as exc:
        raise ScenarioError(f"scenario {scenario.name!r}: sim.{_describe(exc)}") from None
    for job in scenario.jobs:
        try:
            sim.add_job(job)
        except ValueError as exc:
            raise ScenarioError(f"scenario {scenario.name!r}: {exc}") from None
    if scenario.background is not None:
        sim.add_background(scenario.background)
    for i, doc in enumerate(scenario.faults):
        try:
            spec: FaultSpec = parse_fault(doc, i)
            sim.add_fault(spec)
        except FaultError as exc:
            raise ScenarioError(f"scenario {scenario.name!r}: {exc}") from None
    return sim
