"""The inventory refuses what an operator gets wrong, and says where."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricops.core.inventory import InventoryError, load_inventory

GOOD = """
defaults: {interval_s: 5}
targets:
  - {device: leaf-0, protocol: snmp, address: "127.0.0.1:1161",
     snmp: {version: v2c, community: leaf-0}}
  - {device: leaf-0, protocol: gnmi, address: "127.0.0.1:57400", interval_s: 1}
int: {listen: "127.0.0.1:6000"}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


def test_a_good_inventory_loads(tmp_path: Path) -> None:
    inv = load_inventory(_write(tmp_path, GOOD))
    snmp, gnmi = inv.by_protocol("snmp"), inv.by_protocol("gnmi")
    assert [t.device for t in snmp] == ["leaf-0"]
    assert inv.interval_of(snmp[0]) == 5
    assert inv.interval_of(gnmi[0]) == 1
    assert snmp[0].host_port() == ("127.0.0.1", 1161)


def test_misspelled_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("community: leaf-0", "comunity: leaf-0"))
    with pytest.raises(InventoryError, match=r"targets\[0\]\.snmp\.comunity: unknown key "
                                             r"\(did you mean 'community'\?\)"):
        load_inventory(path)
    path = _write(tmp_path, GOOD.replace("interval_s: 1}", "intervall_s: 1}"))
    with pytest.raises(InventoryError, match=r"targets\[1\]\.intervall_s.*'interval_s'"):
        load_inventory(path)


def test_bad_values_and_half_written_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"address '127\.0\.0\.1' must be host:port"):
        load_inventory(_write(tmp_path, GOOD.replace('"127.0.0.1:1161"', '"127.0.0.1"')))
    with pytest.raises(InventoryError, match=r"targets\[0\]\.protocol"):
        load_inventory(_write(tmp_path, GOOD.replace("protocol: snmp", "protocol: netconf")))
    with pytest.raises(InventoryError, match=r"inventory\.yaml: not valid YAML"):
        load_inventory(_write(tmp_path, "targets:\n  - {device: leaf-0, protocol: [snmp,"))
    with pytest.raises(InventoryError, match="cannot read inventory"):
        load_inventory(tmp_path / "missing.yaml")
