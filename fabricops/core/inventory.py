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
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fabricops.core.yamlfile import read_yaml


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
    version: Literal["v2c", "v3"] = "v2c"
    community: str | None = None
    user: str | None = None
    auth_protocol: Literal["SHA", "SHA256", "MD5"] = "SHA"
    auth_key: str | None = Field(default=None, min_length=8)
    priv_protocol: Literal["AES", "AES256", "DES"] = "AES"
    priv_key: str | None = Field(default=None, min_length=8)
    context: str | None = None


class GnmiCredentials(_Strict):
    target: str | None = Field(default=None, description="gNMI target name (default: device)")
    username: str | None = None
    password: str | None = None
    insecure: bool = Field(default=True, description="Plain-text gRPC (no TLS)")
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None


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
