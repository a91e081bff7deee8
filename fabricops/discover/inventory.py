"""The inventory discovery reads: the usual format, where ``device`` may be left out.

Before discovery a switch may be known only by its address (and credentials).
Such a target gets a placeholder name (``?snmp@10.0.0.1:161#3``, its entry) and is named
after discovery by its sysName / LLDP system name; ``named_inventory`` writes
the inventory back with those names, ready for ``fabricops collect``.
Errors name the file, the entry and the key, as the usual loader does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricops.core.inventory import Inventory, InventoryError, inventory_from_dict
from fabricops.core.yamlfile import read_yaml

PLACEHOLDER = "?"


def is_placeholder(device: str) -> bool:
    return device.startswith(PLACEHOLDER)


def discovery_inventory(doc: Any, source: str = "inventory") -> Inventory:
    """Validate an inventory whose targets may lack ``device``."""
    if isinstance(doc, dict) and isinstance(doc.get("targets"), list):
        targets = []
        for i, t in enumerate(doc["targets"]):
            if isinstance(t, dict) and "device" not in t:
                t = {**t, "device": f"{PLACEHOLDER}{t.get('protocol')}@{t.get('address')}#{i}"}
            targets.append(t)
        doc = {**doc, "targets": targets}
    return inventory_from_dict(doc, source)


def load_discovery_inventory(path: str | Path) -> Inventory:
    p = Path(path)
    return discovery_inventory(read_yaml(p, "inventory", InventoryError), str(p))


def named_inventory(inventory: Inventory, names: dict[str, str]) -> Inventory:
    """The inventory with each placeholder replaced by the name found (``names``);
    targets still unnamed are left out."""
    targets = []
    for t in inventory.targets:
        name = names.get(t.device, t.device)
        if is_placeholder(name):
            continue
        targets.append(t.model_copy(update={"device": name}))
    return inventory.model_copy(update={"targets": targets})
