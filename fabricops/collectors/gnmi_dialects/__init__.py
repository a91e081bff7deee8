"""Dialect profiles by name: which tables map a platform's gNMI paths onto the catalogue.

The inventory picks a profile per target (``gnmi.profile``); ``PROFILES`` is
the explicit registry. Each profile module states the vendor models its
tables were written from.
"""

from __future__ import annotations

from typing import Final, Literal

from fabricops.collectors.gnmi_dialects.arista import ARISTA
from fabricops.collectors.gnmi_dialects.cisco import IOS_XR, NXOS
from fabricops.collectors.gnmi_dialects.juniper import JUNOS
from fabricops.collectors.gnmi_dialects.nokia import SR_LINUX
from fabricops.collectors.gnmi_dialects.nvidia import CUMULUS
from fabricops.collectors.gnmi_dialects.openconfig import OPENCONFIG
from fabricops.collectors.gnmi_dialects.rules import Profile, ProfileResolver
from fabricops.collectors.gnmi_dialects.sonic import SONIC

ProfileName = Literal[
    "openconfig", "arista_eos", "cisco_iosxr", "cisco_nxos", "junos", "srlinux", "sonic", "cumulus"
]

PROFILES: Final[dict[str, Profile]] = {
    p.name: p for p in (OPENCONFIG, ARISTA, IOS_XR, NXOS, JUNOS, SR_LINUX, SONIC, CUMULUS)
}

_RESOLVERS: dict[str, ProfileResolver] = {}


def resolver_of(name: str) -> ProfileResolver:
    """The shared resolver of profile ``name`` (KeyError if there is none)."""
    found = _RESOLVERS.get(name)
    if found is None:
        found = _RESOLVERS[name] = ProfileResolver(PROFILES[name])
    return found


__all__ = ["PROFILES", "Profile", "ProfileName", "ProfileResolver", "resolver_of"]
