"""Topology documents: loading, validation messages, save/load, queries."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fabricops.core.topology import (
    NodeRole,
    Topology,
    TopologyError,
    load_topology,
    save_topology,
    topology_from_dict,
)


def tiny() -> dict[str, Any]:
    """Two switches, two hosts; host-1's NIC is not cabled."""
    return {
        "name": "tiny",
        "nodes": [
            {"id": "leaf-0", "role": "leaf", "pod": 0,
             "ports": [{"name": "eth1", "speed_bps": 400_000_000_000},
                       {"name": "eth2", "speed_bps": 400_000_000_000}]},
            {"id": "spine-0", "role": "spine",
             "ports": [{"name": "eth1", "speed_bps": 400_000_000_000}]},
            {"id": "host-0", "role": "host",
             "ports": [{"name": "nic0", "speed_bps": 400_000_000_000, "rail": 0}]},
            {"id": "host-1", "role": "host",
             "ports": [{"name": "nic0", "speed_bps": 400_000_000_000}]},
        ],
        "links": [
            {"a": "leaf-0:eth1", "b": "spine-0:eth1"},
            {"a": "host-0:nic0", "b": "leaf-0:eth2"},
        ],
    }


def with_links(*links: tuple[str, str]) -> dict[str, Any]:
    doc = tiny()
    doc["links"] = [{"a": a, "b": b} for a, b in links]
    return doc


def refused(doc: dict[str, Any], *needles: str) -> None:
    with pytest.raises(TopologyError) as info:
        topology_from_dict(doc)
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_loads_from_yaml_and_json(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"fabric{suffix}"
    text = json.dumps(tiny()) if suffix == ".json" else yaml.safe_dump(tiny())
    path.write_text(text, encoding="utf-8")
    topo = load_topology(path)
    assert topo.name == "tiny"
    assert topo.node_by_id["leaf-0"].role is NodeRole.LEAF
    assert topo.node_by_id["host-0"].ports[0].rail == 0


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_round_trip(tmp_path: Path, suffix: str) -> None:
    topo = topology_from_dict(tiny())
    topo.summary()  # fill cached properties; they must not leak into the file or equality
    path = save_topology(topo, tmp_path / f"out{suffix}")
    assert load_topology(path) == topo
    assert load_topology(save_topology(load_topology(path), path)) == topo


def test_dangling_link_to_unknown_node() -> None:
    refused(with_links(("leaf-0:eth1", "ghost-9:eth1")),
            "link #0", "dangling", "node 'ghost-9' does not exist")


def test_dangling_link_to_unknown_port_of_known_node() -> None:
    refused(with_links(("leaf-0:eth1", "spine-0:eth7")),
            "link #0", "dangling", "port 'spine-0:eth7' does not exist")


def test_malformed_port_id_in_link() -> None:
    refused(with_links(("leaf-0eth1", "spine-0:eth1")), "link #0", "'leaf-0eth1'")


def test_duplicate_node() -> None:
    doc = tiny()
    doc["nodes"].append(copy.deepcopy(doc["nodes"][1]))
    refused(doc, "node 'spine-0' is defined twice")


def test_duplicate_port_on_a_node() -> None:
    doc = tiny()
    doc["nodes"][1]["ports"].append({"name": "eth1", "speed_bps": 1})
    refused(doc, "node 'spine-0' has port 'eth1' twice")


def test_port_used_by_two_links() -> None:
    refused(with_links(("leaf-0:eth1", "spine-0:eth1"), ("host-0:nic0", "leaf-0:eth1")),
            "link #1", "port 'leaf-0:eth1' is already used by link #0")


def test_host_to_host_link() -> None:
    refused(with_links(("host-0:nic0", "host-1:nic0")), "link #0", "joins two hosts")


def test_self_link() -> None:
    refused(with_links(("leaf-0:eth1", "leaf-0:eth1")), "link #0", "joins a port to itself")


def test_invalid_node_id() -> None:
    doc = tiny()
    doc["nodes"][0]["id"] = "leaf 0"
    refused(doc, "'leaf 0'")


def test_schema_errors_name_the_field_and_source() -> None:
    doc = tiny()
    doc["nodes"][0]["ports"][0]["speed_bps"] = 0
    with pytest.raises(TopologyError, match=r"^fabric\.yaml: nodes\.0\.ports\.0\.speed_bps"):
        topology_from_dict(doc, source="fabric.yaml")
    doc = tiny()
    doc["colour"] = "blue"
    refused(doc, "colour")


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(TopologyError, match=re.escape(str(missing))):
        load_topology(missing)
    with pytest.raises(TopologyError, match=re.escape(str(tmp_path))):
        load_topology(tmp_path)


def test_non_utf8_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(TopologyError, match=re.escape(str(path))):
        load_topology(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [("bad.yaml", "nodes: [\n  - id: leaf-0\n"), ("bad.json", '{"nodes": [')],
)
def test_invalid_document_names_the_path(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopologyError, match=re.escape(f"{path}: not valid")):
        load_topology(path)


@pytest.mark.parametrize("text", ["- a\n- b\n", "hello\n", ""])
def test_non_mapping_document_names_the_path(tmp_path: Path, text: str) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TopologyError, match=re.escape(f"{path}: a topology document must be")):
        load_topology(path)


def test_attachment() -> None:
    topo = topology_from_dict(tiny())
    assert topo.attachment("host-0:nic0") == "leaf-0:eth2"
    with pytest.raises(TopologyError, match="'host-1:nic0'"):
        topo.attachment("host-1:nic0")


def test_entity_exists() -> None:
    topo = topology_from_dict(tiny())
    for entity in ("leaf-0", "host-1", "spine-0:eth1", "host-0:nic0",
                   "host-0:nic0~leaf-0:eth2", "leaf-0:eth1~spine-0:eth1"):
        assert topo.entity_exists(entity), entity
    for entity in ("leaf-9", "leaf-0:eth9", "leaf-0:eth2~host-0:nic0", "job-x"):
        assert not topo.entity_exists(entity), entity


def test_summary_and_iterators() -> None:
    topo = topology_from_dict(tiny())
    assert topo.summary() == {"switches": 2, "hosts": 2, "nics": 2, "ports": 5, "links": 2}
    assert [n.id for n in topo.hosts()] == ["host-0", "host-1"]
    assert [n.id for n in topo.switches()] == ["leaf-0", "spine-0"]
    assert list(topo.nics()) == ["host-0:nic0", "host-1:nic0"]
    assert topo.peer_of["spine-0:eth1"] == "leaf-0:eth1"
    assert set(topo.link_by_id) == {"leaf-0:eth1~spine-0:eth1", "host-0:nic0~leaf-0:eth2"}


def test_topology_is_frozen() -> None:
    topo = topology_from_dict(tiny())
    with pytest.raises(ValueError, match="frozen"):
        topo.name = "other"  # type: ignore[misc]
    assert isinstance(topo, Topology)
