"""The RoCE settings a device runs, named once: flat keys, gNMI paths, value rules.

A device's running configuration is a flat mapping from *setting keys* to values:

- switch: ``hash_seed`` (the ECMP hash seed, 0..2^32-1);
- every port of a switch, ``ports.<if>.<leaf>``: ``mtu_bytes``, ``pfc_priorities``
  (the no-drop priorities as text, ``"3"`` or ``"3,4"``, ``""`` for none),
  ``headroom_bytes`` (PFC headroom of the lossless priority group), and the ECN
  (WRED) profile of the lossless egress queue: ``ecn.enabled``,
  ``ecn.min_threshold_bytes``, ``ecn.max_threshold_bytes``, ``ecn.mark_probability_pct``;
- every NIC of a host, ``nics.<if>.<leaf>``: ``mtu_bytes`` and ``pfc_priorities``.

Over gNMI (Get and Set, JSON_IETF or typed scalars) a switch's settings live at
OpenConfig-style paths; openconfig-interfaces has the MTU leaf, openconfig-qos has
WRED leaves but neither PFC nor a hash seed, so those follow the same
``config`` container convention:

==========================  ==========================================================
setting                     path (``IF`` interface name, ``Q`` lossless queue name)
==========================  ==========================================================
hash_seed                   /ecmp/hash/config/seed
mtu_bytes                   /interfaces/interface[name=IF]/config/mtu
pfc_priorities              /qos/interfaces/interface[interface-id=IF]/pfc/config/
                            no-drop-priorities  (a JSON list of priorities)
headroom_bytes              .../pfc/config/headroom-bytes
ecn.enabled                 /qos/interfaces/interface[interface-id=IF]/output/queues/
                            queue[name=Q]/wred/config/enable-ecn
ecn.min_threshold_bytes     .../wred/config/min-threshold
ecn.max_threshold_bytes     .../wred/config/max-threshold
ecn.mark_probability_pct    .../wred/config/max-drop-probability-percent
==========================  ==========================================================

``check_value`` is the one range rule for every value from any source: a value that
breaks it is refused with a message naming the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from fabricops.core.openconfig import OcPath, PathElem, bare_name

SettingValue = int | bool | str

MTU_RANGE: Final = (68, 9216)
MAX_BUFFER_BYTES: Final = 1 << 30


@dataclass(frozen=True)
class Leaf:
    """One per-port (or per-switch) setting: its key leaf, value type and range."""

    key: str
    kind: type
    low: int = 0
    high: int = 0


SWITCH_LEAVES: Final = (Leaf("hash_seed", int, 0, 2**32 - 1),)
PORT_LEAVES: Final = (
    Leaf("mtu_bytes", int, *MTU_RANGE),
    Leaf("pfc_priorities", str),
    Leaf("headroom_bytes", int, 0, MAX_BUFFER_BYTES),
    Leaf("ecn.enabled", bool),
    Leaf("ecn.min_threshold_bytes", int, 0, MAX_BUFFER_BYTES),
    Leaf("ecn.max_threshold_bytes", int, 0, MAX_BUFFER_BYTES),
    Leaf("ecn.mark_probability_pct", int, 0, 100),
)
NIC_LEAVES: Final = (PORT_LEAVES[0], PORT_LEAVES[1])
_BY_LEAF: Final = {leaf.key: leaf for leaf in (*SWITCH_LEAVES, *PORT_LEAVES)}

#: Leaf key -> (path root elements, final elements below the interface or queue).
_QOS_IF: Final = ("qos", "interfaces", "interface")
_WRED: Final = ("output", "queues", "queue", "wred", "config")
PATH_LEAF: Final = {
    "mtu_bytes": "mtu", "pfc_priorities": "no-drop-priorities",
    "headroom_bytes": "headroom-bytes", "ecn.enabled": "enable-ecn",
    "ecn.min_threshold_bytes": "min-threshold", "ecn.max_threshold_bytes": "max-threshold",
    "ecn.mark_probability_pct": "max-drop-probability-percent", "hash_seed": "seed",
}
_KEY_OF_PATH_LEAF: Final = {v: k for k, v in PATH_LEAF.items()}


class SettingError(ValueError):
    """A key, path or value that names no setting or breaks its range; names which."""


def split_key(key: str) -> tuple[str | None, str]:
    """``ports.eth1.ecn.enabled`` -> (``eth1``, ``ecn.enabled``); ``hash_seed`` -> (None, ...)."""
    if key.startswith(("ports.", "nics.")):
        parts = key.split(".", 2)
        if len(parts) == 3 and parts[1]:
            return parts[1], parts[2]
        raise SettingError(f"setting {key!r}: expected ports.<interface>.<setting>")
    return None, key


def leaf_of(key: str) -> Leaf:
    """The rule of setting ``key``; SettingError if it names none."""
    _, leaf = split_key(key)
    rule = _BY_LEAF.get(leaf)
    if rule is None or (key.startswith("nics.") and rule not in NIC_LEAVES):
        known = ", ".join(sorted(_BY_LEAF))
        raise SettingError(f"setting {key!r}: unknown; settings are {known}")
    return rule


def pfc_text(priorities: object) -> str:
    """No-drop priorities as the canonical text ``"3,4"``; SettingError if not 0..7."""
    if isinstance(priorities, str):
        items: list[object] = [p for p in priorities.replace(" ", "").split(",") if p]
    elif isinstance(priorities, list | tuple):
        items = list(priorities)
    else:
        raise SettingError(f"no-drop priorities must be a list of 0..7, got {priorities!r}")
    out = set()
    for p in items:
        try:
            value = int(str(p))
        except ValueError:
            raise SettingError(f"no-drop priority {p!r} is not a number 0..7") from None
        if isinstance(p, bool) or not 0 <= value <= 7:
            raise SettingError(f"no-drop priority {p!r} is not a number 0..7")
        out.add(value)
    return ",".join(str(p) for p in sorted(out))


def typed_value_of(value: Any) -> object:
    """A gNMI TypedValue as a Python value (numbers, bools, strings, decoded JSON; JSON
    that does not parse stays as its text), None when it holds none of these; both
    ends of a settings Get or Set read values this way."""
    kind = value.WhichOneof("value")
    if kind in ("uint_val", "int_val", "bool_val", "string_val", "ascii_val"):
        return getattr(value, kind)
    if kind in ("json_val", "json_ietf_val"):
        try:
            return json.loads(getattr(value, kind))
        except (ValueError, UnicodeDecodeError):
            return getattr(value, kind)
    return None


def check_value(key: str, value: object) -> SettingValue:
    """``value`` as setting ``key`` holds it; SettingError names the key and the rule."""
    rule = leaf_of(key)
    if rule.kind is str:
        return pfc_text(value)
    if rule.kind is bool:
        if not isinstance(value, bool):
            raise SettingError(f"setting {key!r}: needs true or false, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingError(f"setting {key!r}: needs an integer, got {value!r}")
    try:
        number = int(value)
    except ValueError:
        raise SettingError(f"setting {key!r}: needs an integer, got {value!r}") from None
    if not rule.low <= number <= rule.high:
        raise SettingError(f"setting {key!r}: {number} is outside {rule.low}..{rule.high}")
    return number


def setting_path(key: str, queue_name: str = "3") -> OcPath:
    """The gNMI path of a switch's setting ``key`` (see the module docstring)."""
    interface, leaf = split_key(key)
    leaf_of(key)
    name = PATH_LEAF[leaf]
    if interface is None:
        return tuple(PathElem(n, ()) for n in ("ecmp", "hash", "config", name))
    if leaf == "mtu_bytes":
        return (PathElem("interfaces", ()), PathElem("interface", (("name", interface),)),
                PathElem("config", ()), PathElem(name, ()))
    head = (PathElem("qos", ()), PathElem("interfaces", ()),
            PathElem("interface", (("interface-id", interface),)))
    if leaf.startswith("ecn."):
        return (*head, PathElem("output", ()), PathElem("queues", ()),
                PathElem("queue", (("name", queue_name),)), PathElem("wred", ()),
                PathElem("config", ()), PathElem(name, ()))
    return (*head, PathElem("pfc", ()), PathElem("config", ()), PathElem(name, ()))


def key_of_path(path: OcPath) -> str:
    """The setting key a switch's gNMI leaf path names; SettingError if it names none."""
    names = tuple(bare_name(e.name) for e in path)
    text = "/" + "/".join(names)
    if names == ("ecmp", "hash", "config", "seed"):
        return "hash_seed"
    leaf = _KEY_OF_PATH_LEAF.get(names[-1]) if names else None
    if leaf is None or len(path) < 4:
        raise SettingError(f"path {text} names no RoCE setting")
    if names[:2] == ("interfaces", "interface") and names[2:] == ("config", "mtu"):
        interface = path[1].key("name")
    elif names[:3] == _QOS_IF and (names[3:-1] == _WRED or names[3:-1] == ("pfc", "config")):
        interface = path[2].key("interface-id")
    else:
        raise SettingError(f"path {text} names no RoCE setting")
    if not interface or interface == "*":
        raise SettingError(f"path {text} names no interface")
    key = f"ports.{interface}.{leaf}"
    leaf_of(key)
    return key


def port_keys(interface: str, *, nic: bool = False) -> tuple[str, ...]:
    """Every setting key of one switch port (or NIC)."""
    prefix = "nics" if nic else "ports"
    return tuple(f"{prefix}.{interface}.{leaf.key}" for leaf in (NIC_LEAVES if nic
                                                                  else PORT_LEAVES))
