"""Running settings over gNMI: the twin's target serves and takes them; the client parses
them, and counts what it cannot use."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_settings import (
    GnmiSettingsClient,
    SettingsReadError,
    parse_settings,
    settings_set_request,
)
from fabricops.core.roce_settings import SettingError, check_value, key_of_path, setting_path
from fabricops.simulator.agents.service import SimulatedFabric, SimulatedFabricConfig
from fabricops.simulator.engine import Simulator
from tests.config.twin import leaf_spine_32


@pytest.fixture(scope="module")
def twin() -> Iterator[SimulatedFabric]:
    fab = SimulatedFabric(Simulator(leaf_spine_32()), SimulatedFabricConfig(speed=20.0))
    fab.start()
    yield fab
    fab.stop()


@pytest.fixture
def client(twin: SimulatedFabric) -> GnmiSettingsClient:
    return GnmiSettingsClient(dict.fromkeys(twin.switches, twin.gnmi.address), timeout_s=5)


def test_get_answers_every_setting_of_a_switch_as_the_twin_runs_it(
        twin: SimulatedFabric, client: GnmiSettingsClient) -> None:
    parsed = client.read("leaf-1")
    assert not parsed.unmapped
    assert not parsed.refused
    assert parsed.values == twin.call(lambda sim: sim.settings.device_settings("leaf-1"))
    assert parsed.values["ports.eth1.pfc_priorities"] == "3"


def test_set_changes_the_twin_and_a_bad_value_changes_nothing(
        twin: SimulatedFabric, client: GnmiSettingsClient) -> None:
    client.write("leaf-2", {"ports.eth9.mtu_bytes": 4200, "ports.eth9.pfc_priorities": "3,4",
                            "ports.eth9.ecn.enabled": False, "hash_seed": 77})
    now = twin.call(lambda sim: sim.settings.device_settings("leaf-2"))
    assert (now["ports.eth9.mtu_bytes"], now["ports.eth9.pfc_priorities"],
            now["ports.eth9.ecn.enabled"], now["hash_seed"]) == (4200, "3,4", False, 77)
    with pytest.raises(SettingError, match="outside"):
        client.write("leaf-2", {"ports.eth9.mtu_bytes": 20000})
    request = settings_set_request("leaf-2", {"ports.eth9.mtu_bytes": 1500})
    request.update[0].path.elem[1].key["name"] = "eth99"  # an interface the switch lacks
    with pytest.raises(SettingsReadError, match="eth99"):
        asyncio.run(client._call("leaf-2", "Set", request))
    assert twin.call(lambda sim: sim.settings.device_settings("leaf-2")
                     )["ports.eth9.mtu_bytes"] == 4200


def test_unknown_switch_and_unreachable_server_are_named(client: GnmiSettingsClient) -> None:
    with pytest.raises(SettingsReadError, match="no gNMI address"):
        client.read("leaf-99")
    closed = GnmiSettingsClient({"leaf-0": "127.0.0.1:1"}, timeout_s=1)
    with pytest.raises(SettingsReadError, match=r"leaf-0 at 127\.0\.0\.1:1"):
        closed.read("leaf-0")


def _answer(*updates: tuple[str, object]) -> object:
    notes = []
    for path, value in updates:
        val = gnmi_pb2.TypedValue(json_ietf_val=json.dumps(value).encode()) \
            if not isinstance(value, bytes) else gnmi_pb2.TypedValue(json_ietf_val=value)
        elems = [gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                 for e in setting_path(path)] if not path.startswith("/") else [
            gnmi_pb2.PathElem(name=n) for n in path.strip("/").split("/")]
        notes.append(gnmi_pb2.Notification(update=[gnmi_pb2.Update(
            path=gnmi_pb2.Path(elem=elems), val=val)]))
    return gnmi_pb2.GetResponse(notification=notes)


def test_paths_that_name_no_setting_and_bad_values_are_counted_not_dropped() -> None:
    parsed = parse_settings(_answer(
        ("ports.eth1.mtu_bytes", 9100),
        ("/qos/interfaces/interface/pfc/config/colour", 3),  # garbage leaf
        ("/system/config/hostname", "x"),
        ("ports.eth1.ecn.mark_probability_pct", 250),  # out of range
        ("ports.eth1.pfc_priorities", [3, 9]),  # priority out of range
        ("ports.eth1.ecn.enabled", b"{trunc"),  # truncated JSON
        ("hash_seed", -1)))
    assert parsed.values == {"ports.eth1.mtu_bytes": 9100}
    assert len(parsed.unmapped) == 2
    assert len(parsed.refused) == 4
    assert any("outside 0..100" in why for _, why in parsed.refused)


@pytest.mark.parametrize(("key", "value"), [
    ("ports.eth1.mtu_bytes", True), ("ports.eth1.mtu_bytes", "12x"),
    ("ports.eth1.pfc_priorities", "3,,8"), ("ports.eth1.ecn.enabled", "yes"),
    ("ports..mtu_bytes", 9100), ("ports.eth1.colour", 1), ("nics.nic0.headroom_bytes", 1)])
def test_garbage_keys_and_values_are_refused_by_name(key: str, value: object) -> None:
    with pytest.raises(SettingError, match=r"setting|priority"):
        check_value(key, value)


def test_every_setting_path_maps_back_to_its_key() -> None:
    for key in ("hash_seed", "ports.eth3.mtu_bytes", "ports.eth3.pfc_priorities",
                "ports.eth3.headroom_bytes", "ports.eth3.ecn.enabled",
                "ports.eth3.ecn.min_threshold_bytes", "ports.eth3.ecn.max_threshold_bytes",
                "ports.eth3.ecn.mark_probability_pct"):
        assert key_of_path(setting_path(key)) == key
