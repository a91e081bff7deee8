"""openconfig-lldp leaves into a report, from PROTO scalars and from JSON_IETF containers
(as some platforms answer a Get of /lldp with one value). Leaves are written here from
the openconfig-lldp model's tree."""

from __future__ import annotations

import json
from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from fabricops.discover.gnmi_rows import leaves_of, report_from_gnmi


def _path(*elems: str | tuple[str, dict[str, str]]) -> Any:
    out = []
    for e in elems:
        name, keys = (e, {}) if isinstance(e, str) else e
        out.append(gnmi_pb2.PathElem(name=name, key=keys))
    return gnmi_pb2.Path(elem=out)


def _neighbor(intf: str, **state: str) -> list[Any]:
    base = ("lldp", "interfaces", ("interface", {"name": intf}), "neighbors",
            ("neighbor", {"id": "1"}), "state")
    return [gnmi_pb2.Update(path=_path(*base, k.replace("_", "-")),
                            val=gnmi_pb2.TypedValue(string_val=v)) for k, v in state.items()]


def _note(updates: list[Any]) -> Any:
    return gnmi_pb2.Notification(timestamp=1, prefix=gnmi_pb2.Path(target="leaf-1"),
                                 update=updates)


def test_proto_leaves_of_each_id_type_are_read() -> None:
    updates = [gnmi_pb2.Update(path=_path("lldp", "state", "system-name"),
                               val=gnmi_pb2.TypedValue(string_val="leaf-1"))]
    updates += _neighbor("Ethernet1", chassis_id="02-00-00-00-00-0A",
                         chassis_id_type="MAC_ADDRESS", port_id="Ethernet7",
                         port_id_type="INTERFACE_NAME", system_name="spine-0")
    updates += _neighbor("Ethernet2", chassis_id="SN9", chassis_id_type="LOCAL",
                         port_id="533", port_id_type="LOCAL", system_name="spine-1")
    updates += _neighbor("Ethernet3", chassis_id="SN9", chassis_id_type="LOCAL",
                         port_id="02:00:00:00:00:0b", port_id_type="MAC_ADDRESS")
    report = report_from_gnmi("leaf-1", leaves_of([_note(updates)]))
    assert report.sys_name == "leaf-1"
    got = [(n.local_port, n.port_subtype, n.port_id, n.chassis_id) for n in report.neighbors]
    assert got == [("Ethernet1", 5, "Ethernet7", "02:00:00:00:00:0a"),
                   ("Ethernet2", 7, "533", "SN9"),
                   ("Ethernet3", 3, "02:00:00:00:00:0b", "SN9")]
    assert report.findings == []


def test_a_json_ietf_container_is_flattened() -> None:
    tree = {"openconfig-lldp:interfaces": {"interface": [
        {"name": "Ethernet5", "state": {"name": "Ethernet5"}, "neighbors": {"neighbor": [
            {"id": "abc", "state": {
                "chassis-id": "aa:bb:cc:dd:ee:ff", "chassis-id-type": "MAC_ADDRESS",
                "port-id": "nic3", "port-id-type": "openconfig-lldp-types:INTERFACE_NAME",
                "system-name": "host-042"},
             "capabilities": {"capability": [
                 {"name": "openconfig-lldp-types:STATION_ONLY",
                  "state": {"name": "STATION_ONLY", "enabled": True}}]}}]}}]}}
    note = _note([gnmi_pb2.Update(path=_path("lldp"), val=gnmi_pb2.TypedValue(
        json_ietf_val=json.dumps(tree).encode()))])
    report = report_from_gnmi("leaf-1", leaves_of([note]))
    (n,) = report.neighbors
    assert (n.local_port, n.port_id, n.sys_name, n.station) == \
        ("Ethernet5", "nic3", "host-042", True)


def test_garbage_and_truncated_neighbours_are_counted() -> None:
    updates = _neighbor("Ethernet1", chassis_id="x", chassis_id_type="MAC_ADDRESS",
                        port_id="p", port_id_type="TELEPATHY")
    updates += _neighbor("Ethernet2", chassis_id="x", chassis_id_type="LOCAL")
    updates += _neighbor("Ethernet3", chassis_id="", chassis_id_type="LOCAL", port_id="",
                         port_id_type="LOCAL")
    updates.append(gnmi_pb2.Update(path=_path("lldp", "state", "chassis-id"),
                                   val=gnmi_pb2.TypedValue(json_ietf_val=b"{not json")))
    report = report_from_gnmi("leaf-1", leaves_of([_note(updates)]))
    assert report.neighbors == []
    assert sorted(f.kind.name for f in report.findings) == ["EMPTY_ID", "TRUNCATED",
                                                            "UNKNOWN_SUBTYPE"]
    assert report.chassis_id == ""
