"""The inventory: which devices to collect from, how, and how often.

One YAML document::

    defaults: {interval_s: 10}
    targets:
      - {device: leaf-0, protocol: snmp, address: "127.0.0.1:1161",
         snmp: {version: v2c, community: leaf-0}}
      - {device: leaf-0, protocol: gnmi, address: "127.0.0.1:57400", interval_s: 1,
         gnmi: {username: admin, password: admin, insecure: true}}
    int: {listen: "127.0.0.1:6000"}

Errors name the file, the entry and the key; a misspelled key suggests the
right one.
"""

from __future__ import annotations

import difflib
import re
import string
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fabricops.core.openconfig import PathSyntaxError, parse_path
from fabricops.core.yamlfile import read_yaml

_ORIGIN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*:(?=/)")
"""An ``origin:`` in front of subscription path text (``eos_native:/Smash/...``)."""


def check_host_port(value: str) -> str:
    """Return ``value`` if it is ``host:port`` with a port in 1..65535, else ValueError."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address {value!r} must be host:port with a port in 1..65535")
    return value


class InventoryError(ValueError):
    """An inventory that cannot be used; the message names file, entry and key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SnmpCredentials(_Strict):
    """How to reach one SNMP agent: version, credentials and transport settings.

    Settings left unset (None) take the poller's defaults. ``walk`` ``getnext``
    suits agents without GETBULK (every SNMPv1 agent: v1 walks with GETNEXT).
    ``port_name`` overrides the port naming rule with a template over
    ``{ifName}``, ``{ifDescr}``, ``{ifAlias}`` and ``{ifIndex}``.
    """

    version: Literal["v1", "v2c", "v3"] = "v2c"
    community: str | None = None
    user: str | None = None
    auth_protocol: Literal["SHA", "SHA256", "MD5"] = "SHA"
    auth_key: str | None = Field(default=None, min_length=8)
    priv_protocol: Literal["AES", "AES256", "DES"] = "AES"
    priv_key: str | None = Field(default=None, min_length=8)
    context: str | None = Field(default=None, description="SNMPv3 context name")
    timeout_s: float | None = Field(default=None, gt=0, le=60, description="Per request try")
    retries: int | None = Field(default=None, ge=0, le=10, description="Tries after the first")
    max_repetitions: int | None = Field(default=None, ge=1, le=1000,
                                        description="GETBULK rows per column and request")
    max_varbinds_per_request: int | None = Field(
        default=None, ge=1, le=10_000, description="OIDs asked (x repetitions) per request")
    walk: Literal["getbulk", "getnext"] | None = Field(
        default=None, description="getbulk (v2c, v3) or getnext; v1 always uses getnext")
    engine_discovery_tries: int | None = Field(
        default=None, ge=1, le=10, description="SNMPv3: tries of the first (discovery) request")
    port_name: str | None = Field(default=None, min_length=1,
                                  description="Port naming template, e.g. '{ifDescr}'")

    @field_validator("port_name")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return None
        fields = {f for _, f, _, _ in string.Formatter().parse(value) if f is not None}
        unknown = sorted(fields - _PORT_NAME_FIELDS)
        if unknown or not fields:
            raise ValueError(f"template {value!r} must use {{ifName}}, {{ifDescr}}, "
                             f"{{ifAlias}} or {{ifIndex}}, got {unknown or 'none'}")
        return value

    @model_validator(mode="after")
    def _v1_has_no_getbulk(self) -> SnmpCredentials:
        if self.version == "v1" and self.walk == "getbulk":
            raise ValueError("walk: SNMPv1 has no GETBULK; use getnext")
        return self


_PORT_NAME_FIELDS = frozenset(("ifName", "ifDescr", "ifAlias", "ifIndex"))


GnmiProfile = Literal["openconfig", "arista_eos", "cisco_iosxr", "cisco_nxos", "junos",
                      "srlinux", "sonic", "cumulus"]
"""Dialect profiles of the gNMI collector (``fabricops.collectors.gnmi_dialects``)."""


JOIN_WITHIN: Final = ("Notifications stamped within this of an instant's first are of that "
                      "instant, and take its time (a target that stamps each notification "
                      "as it reads it; at most a quarter of the sample interval); 0: only "
                      "one timestamp")


class GnmiCredentials(_Strict):
    """How a gNMI target is reached and read: dialect, paths, TLS and credentials."""

    target: str | None = Field(default=None, description="gNMI target name (default: the "
                               "profile's, else the device)")
    profile: GnmiProfile = Field(default="openconfig",
                                 description="Dialect: which paths map to which metrics")
    paths: tuple[str, ...] | None = Field(default=None, min_length=1,
                                          description="Subscribed paths (default: the "
                                          "profile's); 'origin:/path' sets an origin")
    encoding: Literal["PROTO", "JSON", "JSON_IETF", "ASCII"] | None = Field(
        default=None, description="Encoding asked for (default: the profile's)")
    username: str | None = None
    password: str | None = None
    insecure: bool = Field(default=True, description="Plain-text gRPC (no TLS)")
    ca_file: Path | None = Field(default=None, description="PEM roots to verify the server")
    cert_file: Path | None = Field(default=None, description="PEM client certificate (mTLS)")
    key_file: Path | None = Field(default=None, description="PEM client key (mTLS)")
    tls_server_name: str | None = Field(default=None, description="Name expected in the "
                                        "server certificate (overrides the address's host)")
    skip_verify: bool = Field(default=False, description="TLS without verifying the server "
                              "certificate (lab use)")
    join_within_s: float = Field(default=0.0, ge=0, le=0.1, description=JOIN_WITHIN)

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for text in value or ():
            try:
                parse_path(_ORIGIN.sub("", text))
            except PathSyntaxError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GnmiCredentials:
        tls = [k for k in ("ca_file", "cert_file", "tls_server_name") if getattr(self, k)]
        if self.insecure and (tls or self.skip_verify):
            raise ValueError(f"{(tls or ['skip_verify'])[0]} needs TLS: set insecure: false")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password go together")
        if self.skip_verify and self.ca_file is not None:
            raise ValueError("skip_verify and ca_file exclude each other")
        return self


class Target(_Strict):
    """One device reached over one protocol."""

    device: str = Field(min_length=1)
    protocol: Literal["snmp", "gnmi"]
    address: str = Field(description="host:port")
    interval_s: float | None = Field(default=None, gt=0, le=3600)
    snmp: SnmpCredentials = Field(default_factory=SnmpCredentials)
    gnmi: GnmiCredentials = Field(default_factory=GnmiCredentials)

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        return check_host_port(value)

    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)


class Defaults(_Strict):
    interval_s: float = Field(default=10.0, gt=0, le=3600)


class IntListener(_Strict):
    listen: str = "127.0.0.1:6000"


class Inventory(_Strict):
    defaults: Defaults = Field(default_factory=Defaults)
    targets: list[Target] = Field(default_factory=list)
    int: IntListener | None = None

    def interval_of(self, target: Target) -> float:
        return target.interval_s or self.defaults.interval_s

    def by_protocol(self, protocol: str) -> list[Target]:
        return [t for t in self.targets if t.protocol == protocol]


_FIELDS: dict[str, type[BaseModel]] = {
    "targets": Target, "snmp": SnmpCredentials, "gnmi": GnmiCredentials,
    "defaults": Defaults, "int": IntListener,
}


def _suggest(loc: tuple[Any, ...], key: str) -> str:
    owner = next((str(p) for p in reversed(loc[:-1]) if isinstance(p, str)), None)
    model: type[BaseModel] = _FIELDS.get(owner or "", Inventory)
    close = difflib.get_close_matches(key, list(model.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = err["loc"]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        if err["type"] == "extra_forbidden":
            parts.append(f"{where}: unknown key{_suggest(loc, str(loc[-1]))}")
        else:
            parts.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return f"{source}: " + "; ".join(parts)


def inventory_from_dict(doc: Any, source: str = "inventory") -> Inventory:
    if not isinstance(doc, dict):
        raise InventoryError(f"{source}: an inventory must be a mapping at the top level")
    try:
        return Inventory.model_validate(doc)
    except ValidationError as exc:
        raise InventoryError(_describe(exc, source)) from None


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory YAML file."""
    p = Path(path)
    return inventory_from_dict(read_yaml(p, "inventory", InventoryError), str(p))
