"""Configuration of the gNMI collector, the subscription it sends, and its channels."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

import grpc
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pygnmi.spec.v080 import gnmi_pb2

from fabricops.collectors.gnmi_dialects import PROFILES
from fabricops.collectors.gnmi_tls import ServerCertificate, fetch_server_certificate
from fabricops.core.backoff import Backoff
from fabricops.core.catalogue import Scope
from fabricops.core.inventory import JOIN_WITHIN, GnmiProfile, Target, check_host_port
from fabricops.core.openconfig import OPENCONFIG, OcPath, PathSyntaxError, parse_path
from fabricops.core.records import SamplingPolicy

DEFAULT_PATHS: Final = OPENCONFIG.subtrees(Scope.PORT)


class GnmiSecurity(BaseModel):
    """How a gNMI channel is secured and authenticated (collector and Set alike)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    insecure: bool = Field(default=True, description="Plain-text gRPC (no TLS)")
    ca_file: Path | None = Field(default=None, description="PEM roots to verify the server")
    cert_file: Path | None = Field(default=None, description="PEM client certificate (mTLS)")
    key_file: Path | None = Field(default=None, description="PEM client key (mTLS)")
    tls_server_name: str | None = Field(default=None,
                                        description="Name expected in the server certificate")
    skip_verify: bool = Field(default=False, description="TLS without verifying the server "
                              "certificate: its own certificate is trusted as fetched")
    username: str | None = None
    password: SecretStr | None = None

    def _where(self) -> str:
        """What an error message names first (a device, say)."""
        return ""

    @model_validator(mode="after")
    def _pairs(self) -> GnmiSecurity:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError(f"{self._where()}cert_file and key_file go together")
        if (self.username is None) != (self.password is None):
            raise ValueError(f"{self._where()}username and password go together")
        if self.skip_verify and self.insecure:
            raise ValueError(f"{self._where()}skip_verify needs TLS: set insecure to false")
        return self

    def security(self) -> dict[str, Any]:
        """These settings as keyword arguments for another GnmiSecurity."""
        return {name: getattr(self, name) for name in GnmiSecurity.model_fields}


class GnmiEndpoint(GnmiSecurity):
    """One device reached over gNMI: where, as which target, in which dialect, what and
    how often. Paths, encoding and target default to the profile's."""

    device: str = Field(min_length=1, description="Device id: frames' device, entity prefix")
    address: str = Field(description="host:port of the gNMI server")
    target: str | None = Field(default=None, description="prefix.target sent (default: the "
                               "profile's, else the device)")
    profile: GnmiProfile = Field(default="openconfig", description="Dialect profile")
    paths: tuple[str, ...] | None = Field(default=None, min_length=1,
                                          description="Subscribed paths ('origin:/path' sets "
                                          "an origin; default: the profile's)")
    encoding: Literal["PROTO", "JSON", "JSON_IETF", "ASCII"] | None = Field(
        default=None, description="Encoding asked for (default: the profile's)")
    sample_interval_s: float = Field(default=10.0, gt=0, le=3600)
    join_within_s: float = Field(default=0.0, ge=0, le=0.1, description=JOIN_WITHIN)

    @field_validator("address")
    @classmethod
    def _host_port(cls, value: str) -> str:
        return check_host_port(value)

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for path in value or ():
            try:
                split_origin(path)
            except PathSyntaxError as exc:
                raise ValueError(str(exc)) from None
        return value

    def _where(self) -> str:
        return f"device {self.device!r}: "

    @property
    def target_name(self) -> str:
        return self.target or PROFILES[self.profile].target or self.device

    @property
    def subscribed_paths(self) -> tuple[str, ...]:
        return self.paths or PROFILES[self.profile].paths or DEFAULT_PATHS

    @property
    def encoding_name(self) -> str:
        return self.encoding or PROFILES[self.profile].encoding

    @classmethod
    def from_target(cls, target: Target, interval_s: float) -> GnmiEndpoint:
        """The endpoint of an inventory target (its ``gnmi`` settings) at ``interval_s``."""
        g = target.gnmi
        return cls(device=target.device, address=target.address, sample_interval_s=interval_s,
                   **g.model_dump(exclude={"password"}),
                   password=None if g.password is None else SecretStr(g.password))


class GnmiCollectorConfig(BaseModel):
    """The targets, and how hard the collector tries to keep their subscriptions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    targets: tuple[GnmiEndpoint, ...] = ()
    connect_timeout_s: float = Field(default=5.0, gt=0,
                                     description="Longest wait for a subscription's first answer")
    stall_timeout_s: float | None = Field(
        default=None, gt=0,
        description="Resubscribe after this long without a message (default: the larger of "
                    "10 s and 5 sample intervals)")
    backoff_initial_s: float = Field(default=0.5, gt=0,
                                     description="Wait after a first failure; doubles after "
                                     "each further one")
    backoff_max_s: float = Field(default=5.0, gt=0, le=5.0,
                                 description="Longest wait between resubscriptions")
    backoff_jitter: float = Field(default=0.2, ge=0, lt=1,
                                  description="Each wait is shortened by a random fraction "
                                  "of at most this")
    max_message_bytes: int = Field(default=64 << 20, ge=1 << 20)
    join_hold_s: float = Field(default=0.05, gt=0, le=1.0,
                               description="How long the notifications of one instant (one "
                               "timestamp) are held for more of them before they go out as "
                               "one frame (at most half the sample interval; only for a "
                               "target seen to split its instants)")
    unhealthy_after_leaves: int = Field(default=10_000, ge=1,
                                        description="A target whose last this many leaf "
                                        "updates in a row mapped to nothing is down")

    @model_validator(mode="after")
    def _unique(self) -> GnmiCollectorConfig:
        seen: set[str] = set()
        for t in self.targets:
            if t.device in seen:
                raise ValueError(f"device {t.device!r} is listed twice")
            seen.add(t.device)
        if self.backoff_initial_s > self.backoff_max_s:
            raise ValueError(f"backoff_initial_s ({self.backoff_initial_s:g}) is above "
                             f"backoff_max_s ({self.backoff_max_s:g})")
        return self

    @property
    def backoff(self) -> Backoff:
        """The wait between a target's resubscriptions."""
        return Backoff(self.backoff_initial_s, self.backoff_max_s, self.backoff_jitter)

    def stall_after_s(self, interval_s: float) -> float:
        return self.stall_timeout_s or max(10.0, 5 * interval_s)


def subscribe_request(endpoint: GnmiEndpoint, interval_s: float) -> Any:
    """The ``gnmi.SubscribeRequest``: STREAM, SAMPLE every ``interval_s``, the endpoint's
    paths, encoding and target."""
    subscriptions = [
        gnmi_pb2.Subscription(path=_gnmi_path(p), mode=gnmi_pb2.SAMPLE,
                              sample_interval=round(interval_s * 1e9))
        for p in endpoint.subscribed_paths
    ]
    sub_list = gnmi_pb2.SubscriptionList(
        prefix=gnmi_pb2.Path(target=endpoint.target_name), subscription=subscriptions,
        mode=gnmi_pb2.SubscriptionList.STREAM,
        encoding=gnmi_pb2.Encoding.Value(endpoint.encoding_name))
    return gnmi_pb2.SubscribeRequest(subscribe=sub_list)


_ORIGIN: Final = re.compile(r"^([A-Za-z][A-Za-z0-9_.-]*):(?=/)")


def split_origin(text: str) -> tuple[str, OcPath]:
    """``origin:/a/b`` as (origin, path); no origin is ``""``. PathSyntaxError if bad."""
    found = _ORIGIN.match(text)
    origin = found.group(1) if found else ""
    return origin, parse_path(text[found.end():] if found else text)


def _gnmi_path(text: str) -> Any:
    origin, path = split_origin(text)
    elems = [gnmi_pb2.PathElem(name=e.name, key=dict(e.keys)) for e in path]
    return gnmi_pb2.Path(origin=origin, elem=elems)


def call_metadata(endpoint: GnmiEndpoint) -> Sequence[tuple[str, str]]:
    """gRPC metadata carrying the endpoint's credentials (none if it has none)."""
    if endpoint.username is None or endpoint.password is None:
        return ()
    return (("username", endpoint.username), ("password", endpoint.password.get_secret_value()))


def open_channel(endpoint: GnmiEndpoint, max_message_bytes: int,
                 server: ServerCertificate | None = None) -> Any:
    """A new grpc.aio channel (plain text, or TLS with the endpoint's files).

    With ``skip_verify`` the server's certificate (``server``, else fetched here,
    blocking) is the only root trusted and its name the name expected. OSError
    names a file that cannot be read or a server that cannot be reached. Must be
    called on the event loop that will use the channel.

    Each channel has a connection of its own (a local subchannel pool): grpc would
    otherwise carry every channel to the same address over one HTTP/2 connection,
    so targets behind one address (a gNMI proxy, the twin) would share its flow
    control, and one stalled stream, or the connection's loss, would hold them all.
    """
    options: list[tuple[str, Any]] = [("grpc.max_receive_message_length", max_message_bytes),
                                      ("grpc.use_local_subchannel_pool", 1)]
    if endpoint.insecure:
        return grpc.aio.insecure_channel(endpoint.address, options=options)
    roots, name = _read(endpoint.ca_file), endpoint.tls_server_name
    if endpoint.skip_verify:
        if server is None:
            server = fetch_server_certificate(endpoint)
        roots, name = server.pem, name or server.name
    if name:
        options.append(("grpc.ssl_target_name_override", name))
    creds = grpc.ssl_channel_credentials(
        root_certificates=roots, private_key=_read(endpoint.key_file),
        certificate_chain=_read(endpoint.cert_file))
    return grpc.aio.secure_channel(endpoint.address, creds, options=options)


def _read(path: Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read {path}: {exc.strerror}") from exc


class PolicyBook:
    """The sampling policies in force, by device (``*``: every device). Thread-safe.

    A newer policy (by ``ts_ns``) replaces the one held for its device; an older
    one is ignored. A device's own policy wins over ``*``; an expired one no
    longer applies.
    """

    def __init__(self) -> None:
        self._policies: dict[str, SamplingPolicy] = {}
        self._lock = threading.Lock()

    def offer(self, policy: SamplingPolicy) -> bool:
        """Hold ``policy`` unless a newer one is held for its device; True if held."""
        with self._lock:
            held = self._policies.get(policy.device)
            if held is not None and held.ts_ns > policy.ts_ns:
                return False
            self._policies[policy.device] = policy
            return True

    def interval_s(self, device: str, default_s: float, now_ns: int) -> float:
        """The interval in force for ``device`` at ``now_ns`` (``default_s`` if none)."""
        with self._lock:
            for key in (device, "*"):
                p = self._policies.get(key)
                if p is not None and (p.expires_ns is None or p.expires_ns > now_ns):
                    return p.interval_s
        return default_s

    def next_expiry_ns(self, now_ns: int) -> int | None:
        """When the next policy held expires (after ``now_ns``), if any does."""
        with self._lock:
            times = [p.expires_ns for p in self._policies.values()
                     if p.expires_ns is not None and p.expires_ns > now_ns]
        return min(times, default=None)
