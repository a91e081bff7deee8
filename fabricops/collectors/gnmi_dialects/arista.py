"""Arista EOS: OpenConfig with EOS's augmentations, and native ``eos_native`` paths.

EOS streams OpenConfig containers as JSON_IETF objects with module-qualified
members (``openconfig-interfaces:counters``) and adds ``arista-intf-augments``
leaves (``inactive``) under the interface state: the OpenConfig rules apply
and the augmentations are named gaps. Native paths (origin ``eos_native``),
from Arista's published path lists and the telemetry browser:

- ``/Smash/counters/ethIntf/<agent>/current/counter/<intf>/statistics/<leaf>``
  (``<agent>`` is the ASIC family's counter agent: StrataCounters,
  SandCounters, FocalPointV2, ...): ``inOctets``, ``outOctets``,
  ``inUcastPkts``, ``outUcastPkts``, ``inErrors``, ``inDiscards``,
  ``outDiscards``;
- ``/Sysdb/interface/status/eth/phy/slice/<n>/intfStatus/<intf>/operStatus``,
  an object whose ``Name`` is ``intfOperUp``, ``intfOperDown``, ...
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.openconfig import (
    OPENCONFIG,
    OPENCONFIG_GAPS,
    OPENCONFIG_RULES,
)
from fabricops.collectors.gnmi_dialects.rules import Profile, Rule, Unsupported, ValueMap, rules

SMASH: Final = "/Smash/counters/ethIntf/*/current/counter/{if}/statistics"
INTF_STATUS: Final = "/Sysdb/interface/status/eth/phy/slice/*/intfStatus/{if}"
EOS_OPER: Final = ValueMap(
    states={
        "intfoperup": 1,
        "intfoperdown": 2,
        "intfopertesting": 3,
        "intfoperunknown": 4,
        "intfoperdormant": 5,
        "intfopernotpresent": 6,
        "intfoperlowerlayerdown": 7,
    }
)

EOS_NATIVE_RULES: Final = (
    *rules(
        [
            (f"{SMASH}/inOctets", "in_octets"),
            (f"{SMASH}/outOctets", "out_octets"),
            (f"{SMASH}/inUcastPkts", "in_pkts"),
            (f"{SMASH}/outUcastPkts", "out_pkts"),
            (f"{SMASH}/inErrors", "in_errors"),
            (f"{SMASH}/inDiscards", "in_discards"),
            (f"{SMASH}/outDiscards", "out_discards"),
        ]
    ),
    Rule(f"{INTF_STATUS}/operStatus/Name", "oper_status", EOS_OPER),
)

ARISTA: Final = Profile(
    name="arista_eos",
    description="Arista EOS: OpenConfig (JSON_IETF) and eos_native Smash/Sysdb paths",
    rules=OPENCONFIG_RULES + EOS_NATIVE_RULES,
    unsupported=(
        *OPENCONFIG_GAPS,
        Unsupported(
            "/Smash/counters/ethIntf",
            "multicast, broadcast, rates and MAC error counters: no catalogue metric",
        ),
        Unsupported("/Sysdb/interface/status/eth/phy", "interface status other than operStatus"),
    ),
    paths=OPENCONFIG.paths,
    encoding="JSON_IETF",
    instances=frozenset({"counter", "intfStatus"}),
    entity_lists=(*OPENCONFIG.entity_lists, "/Smash/counters/ethIntf/*/current/counter/{if}"),
)
