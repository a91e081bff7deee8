"""Cisco IOS XR and NX-OS native models.

IOS XR (origin = the module name, or module-qualified first elements):

- ``Cisco-IOS-XR-infra-statsd-oper``: ``infra-statistics/interfaces/
  interface[interface-name]/latest/generic-counters``. XR counts packets in
  total (``packets-received``) and multicast/broadcast apart; a RoCE fabric's
  traffic is unicast, so the totals are read as ``in_pkts``/``out_pkts``.
- ``Cisco-IOS-XR-pfi-im-cmd-oper``: ``interfaces/interface-xr/interface/state``
  (``im-state-up``, ``im-state-down``, ``im-state-admin-down``, ...).
- ``Cisco-IOS-XR-controller-optics-oper``: ``optics-oper/optics-ports/
  optics-port[name]/optics-info/lane-data[lane-index]/receive-power`` and
  ``transmit-power``, in units of 0.01 dBm (the entity is the optics port,
  ``Optics0/0/0/0``). One reading per port: any lane.
- ``Cisco-IOS-XR-qos-ma-oper``: ``qos/interface-table``: class statistics of
  policy-map classes and queue lengths in packets; no catalogue metric
  (named gap).

NX-OS device YANG (DME, origin ``device``): ``/System/intf-items/phys-items/
PhysIf-list[id]/dbgIfIn-items`` and ``dbgIfOut-items`` (``octets``,
``ucastPkts``, ``errors``, ``discards``), ``dbgEtherStats-items/
cRCAlignErrors``, ``phys-items/operSt`` (``up``, ``down``, ``link-up``).
NX-OS also serves OpenConfig; those rules apply too.
"""

from __future__ import annotations

from typing import Final

from fabricops.collectors.gnmi_dialects.openconfig import (
    OPENCONFIG,
    OPENCONFIG_GAPS,
    OPENCONFIG_RULES,
)
from fabricops.collectors.gnmi_dialects.rules import (
    OPER_STATES,
    Profile,
    Rule,
    Unsupported,
    ValueMap,
    rules,
)

XR_IF: Final = "/infra-statistics/interfaces/interface[interface-name={if}]/latest/generic-counters"
XR_OPTICS: Final = (
    "/optics-oper/optics-ports/optics-port[name={if}]/optics-info/lane-data[lane-index=*]"
)
XR_STATE: Final = ValueMap(
    states={
        "imstateup": 1,
        "imstatedown": 2,
        "imstateadmindown": 2,
        "imstatenotready": 7,
        "imstateerrdisable": 2,
        "imstateadminup": 2,
    }
)
CENTI_DBM: Final = ValueMap(scale=0.01)

XR_RULES: Final = (
    *rules(
        [
            (f"{XR_IF}/bytes-received", "in_octets"),
            (f"{XR_IF}/bytes-sent", "out_octets"),
            (f"{XR_IF}/packets-received", "in_pkts"),
            (f"{XR_IF}/packets-sent", "out_pkts"),
            (f"{XR_IF}/input-errors", "in_errors"),
            (f"{XR_IF}/crc-errors", "in_fcs_errors"),
            (f"{XR_IF}/input-drops", "in_discards"),
            (f"{XR_IF}/output-drops", "out_discards"),
            (f"{XR_IF}/carrier-transitions", "carrier_transitions"),
        ]
    ),
    Rule("/interfaces/interface-xr/interface[interface-name={if}]/state", "oper_status", XR_STATE),
    Rule(f"{XR_OPTICS}/receive-power", "rx_power_dbm", CENTI_DBM),
    Rule(f"{XR_OPTICS}/transmit-power", "tx_power_dbm", CENTI_DBM),
)

IOS_XR: Final = Profile(
    name="cisco_iosxr",
    description="Cisco IOS XR: infra-statsd, pfi-im-cmd, controller-optics, qos-ma",
    rules=XR_RULES + OPENCONFIG_RULES,
    unsupported=(
        Unsupported(
            "/infra-statistics/interfaces/interface/latest/generic-counters",
            "multicast, broadcast, runts, giants, throttles, times: no metric",
        ),
        Unsupported(
            "/infra-statistics/interfaces/interface",
            "rates and protocol counters: no catalogue metric",
        ),
        Unsupported("/interfaces/interface-xr/interface", "interface attributes other than state"),
        Unsupported(
            "/optics-oper/optics-ports/optics-port",
            "optics leaves other than lane receive/transmit power",
        ),
        Unsupported(
            "/qos/interface-table", "policy-map class statistics; queue lengths are in packets"
        ),
        *OPENCONFIG_GAPS,
    ),
    paths=(
        "Cisco-IOS-XR-infra-statsd-oper:infra-statistics/interfaces/interface/latest/"
        "generic-counters",
        "Cisco-IOS-XR-pfi-im-cmd-oper:interfaces/interface-xr/interface/state",
        "Cisco-IOS-XR-controller-optics-oper:optics-oper/optics-ports/optics-port/"
        "optics-info/lane-data",
    ),
    encoding="JSON_IETF",
    entity_lists=(
        "/infra-statistics/interfaces/interface[interface-name={if}]",
        "/interfaces/interface-xr/interface[interface-name={if}]",
    ),
)

NX_IF: Final = "/System/intf-items/phys-items/PhysIf-list[id={if}]"
NX_STATE: Final = ValueMap(states={**OPER_STATES, "linkup": 1})

NXOS_RULES: Final = (
    *rules(
        [
            (f"{NX_IF}/dbgIfIn-items/octets", "in_octets"),
            (f"{NX_IF}/dbgIfOut-items/octets", "out_octets"),
            (f"{NX_IF}/dbgIfIn-items/ucastPkts", "in_pkts"),
            (f"{NX_IF}/dbgIfOut-items/ucastPkts", "out_pkts"),
            (f"{NX_IF}/dbgIfIn-items/errors", "in_errors"),
            (f"{NX_IF}/dbgIfIn-items/discards", "in_discards"),
            (f"{NX_IF}/dbgIfOut-items/discards", "out_discards"),
            (f"{NX_IF}/dbgEtherStats-items/cRCAlignErrors", "in_fcs_errors"),
        ]
    ),
    Rule(f"{NX_IF}/phys-items/operSt", "oper_status", NX_STATE),
)

NXOS: Final = Profile(
    name="cisco_nxos",
    description="Cisco NX-OS: device YANG (DME) interface counters, and OpenConfig",
    rules=NXOS_RULES + OPENCONFIG_RULES,
    unsupported=(
        Unsupported(
            "/System/intf-items/phys-items/PhysIf-list/dbgIfIn-items",
            "multicast, broadcast, unknown protocols, rates: no catalogue metric",
        ),
        Unsupported(
            "/System/intf-items/phys-items/PhysIf-list/dbgIfOut-items",
            "multicast, broadcast, errors, rates: no catalogue metric",
        ),
        Unsupported(
            "/System/intf-items/phys-items/PhysIf-list/dbgEtherStats-items",
            "RMON size buckets, jabbers, collisions: no catalogue metric",
        ),
        Unsupported(
            "/System/intf-items/phys-items/PhysIf-list",
            "interface configuration and attributes other than operSt",
        ),
        *OPENCONFIG_GAPS,
    ),
    paths=(
        "/System/intf-items/phys-items/PhysIf-list/dbgIfIn-items",
        "/System/intf-items/phys-items/PhysIf-list/dbgIfOut-items",
        "/System/intf-items/phys-items/PhysIf-list/dbgEtherStats-items",
        "/System/intf-items/phys-items/PhysIf-list/phys-items/operSt",
    ),
    encoding="JSON",
    entity_lists=(NX_IF, *OPENCONFIG.entity_lists),
)
