"""Per-device intents: the headroom budget, the NIC TOS, and settings that compare flat."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fabricops.config.devices import HostIntent, SwitchIntent, settings
from fabricops.config.plan import FabricPlan


def test_switch_headroom_must_fit_the_budget(tiny_plan: FabricPlan) -> None:
    leaf = tiny_plan.switches[0]
    doc = leaf.model_dump()
    doc["headroom_budget_bytes"] = leaf.headroom_total_bytes - 1
    with pytest.raises(ValidationError) as info:
        SwitchIntent.model_validate(doc)
    message = info.value.errors()[0]["msg"]
    assert "leaf-0: PFC headroom" in message
    assert "for 4 ports does not fit" in message


def test_headroom_total_is_zero_without_pfc(tiny_plan: FabricPlan) -> None:
    leaf = tiny_plan.switches[0]
    lossy = leaf.model_copy(update={"pfc": leaf.pfc.model_copy(update={"enabled": False})})
    assert leaf.headroom_total_bytes == sum(p.headroom_bytes for p in leaf.ports)
    assert lossy.headroom_total_bytes == 0
    assert lossy.pfc_priorities == ()


def test_host_tos_is_roce_dscp_with_ect0(tiny_plan: FabricPlan) -> None:
    host = tiny_plan.hosts[0]
    assert host.roce_tos == 26 << 2 | 2 == 106
    assert host.pfc_priorities == (3,)


def test_dcqcn_min_rate_must_be_below_nic_speed(tiny_plan: FabricPlan) -> None:
    doc = tiny_plan.hosts[0].model_dump()
    doc["dcqcn"]["rp"]["min_rate_mbps"] = 400_000
    doc["dcqcn"]["rp"]["ai_rate_mbps"] = 1
    doc["dcqcn"]["rp"]["hai_rate_mbps"] = 2
    with pytest.raises(ValidationError, match="host-000:nic0: DCQCN min_rate_mbps"):
        HostIntent.model_validate(doc)


def test_settings_flatten_ports_by_name(tiny_plan: FabricPlan) -> None:
    flat = settings(tiny_plan.switches[0])
    assert flat["mtu_bytes"] == 9100
    assert flat["qos.lossless_priority"] == 3
    assert flat["pfc.watchdog.detection_ms"] == 200
    assert flat["ports.eth1.cable_m"] == 3.0
    assert flat["ports.eth3.cable_m"] == 50.0
    assert flat["ports.eth3.ecn.min_threshold_bytes"] == 600_000
    host = settings(tiny_plan.hosts[0])
    assert host["nics.nic1.rdma_device"] == "mlx5_1"
    assert host["dcqcn.np.min_time_between_cnps_us"] == 4


def test_settings_of_two_devices_show_what_differs(tiny_plan: FabricPlan) -> None:
    intended = tiny_plan.switches[0]
    running = intended.model_copy(update={"mtu_bytes": 1500, "hash_seed": 23})
    a, b = settings(intended), settings(running)
    assert {k for k in a if a[k] != b[k]} == {"mtu_bytes", "hash_seed"}
