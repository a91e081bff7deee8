"""Every shipped scenario builds, places its jobs' hosts and names entities its fabric has."""

from __future__ import annotations

import pytest

from fabricops.simulator.scenario import load_preset, preset_names, scenario_topology

GPUS = {"rail-16k": 16384, "rail-64k": 65536, "rail-100k": 100352}  # as their names say


@pytest.mark.parametrize("name", preset_names())
def test_a_preset_builds_and_its_faults_name_real_entities(name: str) -> None:
    scenario = load_preset(name)
    topology = scenario_topology(scenario)
    hosts = sum(1 for _ in topology.hosts())
    assert sum(job.hosts for job in scenario.jobs) <= hosts
    for fault in scenario.faults:
        assert topology.entity_exists(str(fault["entity"])), fault
    if name in GPUS:
        assert topology.summary()["nics"] == GPUS[name]


def test_the_large_presets_are_shipped() -> None:
    assert set(GPUS) <= set(preset_names())
