"""Sampling tiers: suspect ports' devices at 100 ms, other implicated ones at 1 s, the
rest slow; suspicion is per port, capped, and calms down on its own clock."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry
from pydantic import ValidationError

from fabricops.core.membus import MemoryBus
from fabricops.core.records import Event, EventKind, SamplingPolicy
from fabricops.pipeline.sampling import SamplingConfig, SamplingController
from fabricops.simulator.builders import fat_tree

S = 10**9
PORT = "leaf-0-0:eth1"  # faces host-000:nic0


def event(metric: str, value: float, kind: EventKind = EventKind.THRESHOLD, *,
          at_s: float = 100.0, entity: str = PORT) -> Event:
    return Event(ts_ns=round(at_s * S), device=entity.split(":")[0], entity=entity,
                 metric=metric, kind=kind, value=value)


def controller(**config: object) -> tuple[SamplingController, CollectorRegistry]:
    bus = MemoryBus()
    bus.start()
    registry = CollectorRegistry()
    return SamplingController(SamplingConfig.model_validate(config), bus, fat_tree(k=4),
                              registry), registry


def intervals(policies: list[SamplingPolicy]) -> dict[str, float]:
    return {p.device: p.interval_s for p in policies}


@pytest.mark.parametrize(("trigger", "want"), [
    (event("pfc_rx_pause{prio=3}", 24e3), 0.1),
    (event("out_discards", 5.0), 0.1),
    (event("ecn_marked_pkts", 1e5, EventKind.ANOMALY), 0.1),  # marks rising
    (event("ecn_marked_pkts", 0.0, EventKind.ANOMALY), 1.0),  # marking stopped
    (event("in_fcs_errors", 3.0), 1.0),  # trouble, but not congestion
    (event("oper_status", 2.0, EventKind.STATE_CHANGE), 1.0),
])
def test_congestion_on_a_port_puts_its_devices_at_the_suspect_interval(
        trigger: Event, want: float) -> None:
    ctl, _ = controller()
    policies = ctl.observe([trigger], trigger.ts_ns)
    assert intervals(policies) == {"leaf-0-0": want, "host-000": want}
    if want == 0.1:
        assert ctl.suspects == {"leaf-0-0": frozenset({PORT}),
                                "host-000": frozenset({"host-000:nic0"})}
        assert PORT in policies[1].reason


def test_a_suspect_port_calms_to_fast_then_slow() -> None:
    ctl, registry = controller(suspect_calm_s=10, calm_s=30)
    pause = "pfc_rx_pause{prio=3}"
    ctl.observe([event(pause, 24e3, at_s=100)], 100 * S)
    assert registry.get_sample_value("fabricops_sampling_suspect_devices") == 2
    assert registry.get_sample_value("fabricops_sampling_suspect_ports") == 2
    assert ctl.observe([], 150 * S) == [], "suspect while the condition is open"
    ctl.observe([event(pause, 0.0, EventKind.CLEARED, at_s=151)], 151 * S)
    assert ctl.observe([], 160 * S + S // 2) == []
    assert intervals(ctl.observe([], 161 * S)) == {"leaf-0-0": 1.0, "host-000": 1.0}
    assert ctl.interval_of("leaf-0-0") == 1.0
    assert intervals(ctl.observe([], 181 * S)) == {"leaf-0-0": 10.0, "host-000": 10.0}
    assert ctl.hot == frozenset()
    assert ctl.interval_of("leaf-0-0") is None
    assert registry.get_sample_value("fabricops_sampling_suspect_devices") == 0


def test_suspect_devices_past_the_cap_stay_at_the_fast_interval() -> None:
    ctl, registry = controller(max_suspect_devices=1, neighbours=False)
    first = event("pfc_rx_pause{prio=3}", 24e3, at_s=100)
    ctl.observe([first], 100 * S)
    later = event("pfc_rx_pause{prio=3}", 24e3, at_s=101, entity="leaf-1-0:eth1")
    policies = ctl.observe([later], 101 * S)
    assert [(p.device, p.interval_s) for p in policies] == [("leaf-1-0", 1.0)]
    assert "cap" in policies[0].reason
    assert ctl.suspect == frozenset({"leaf-0-0"})
    assert registry.get_sample_value("fabricops_sampling_suspects_over_cap") == 1


@pytest.mark.parametrize("config", [
    {"suspect_interval_s": 2.0},
    {"suspect_metrics": ("no_such_metric",)},
    {"fast_interval_s": 20.0},
])
def test_bad_sampling_configs_are_refused(config: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SamplingConfig.model_validate(config)
