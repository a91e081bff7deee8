"""openconfig-lldp over gNMI: one Get per subtree, on the gNMI collector's channels.

A thin shell: ``/lldp`` is required; ``/interfaces/interface/ethernet/state``
(port speed, MAC) and ``/interfaces/interface/state/ifindex`` are read when the
device has them. PROTO encoding is asked first, JSON_IETF if the device
refuses it. The leaves go to :func:`~fabricops.discover.gnmi_rows.report_from_gnmi`.
A target without a name and without ``gnmi.target`` is asked with no target.
"""

from __future__ import annotations

from typing import Any, Final

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from fabricops.collectors.gnmi_config import GnmiEndpoint, call_metadata, open_channel
from fabricops.core.inventory import Target
from fabricops.core.openconfig import parse_path
from fabricops.discover.gnmi_rows import leaves_of, report_from_gnmi
from fabricops.discover.model import DeviceReport

LLDP_PATH: Final = "/lldp"
PORT_PATHS: Final = ("/interfaces/interface/ethernet/state", "/interfaces/interface/state/ifindex")
_ABSENT = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED,
           grpc.StatusCode.INVALID_ARGUMENT}


class GnmiFetchError(Exception):
    """A device whose LLDP could not be read; the message names it and the cause."""


def _path(text: str) -> Any:
    return gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name=e.name, key=dict(e.keys))
                               for e in parse_path(text)])


class GnmiLldpSource:
    """Reads one device's LLDP over gNMI per ``fetch``."""

    def __init__(self, timeout_s: float = 5.0, max_message_bytes: int = 64 << 20) -> None:
        self.timeout_s = timeout_s
        self.max_message_bytes = max_message_bytes

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def fetch(self, target: Target, label: str, device: str | None) -> DeviceReport:
        creds = target.gnmi
        endpoint = GnmiEndpoint(
            device=target.device, address=target.address, target=creds.target,
            insecure=creds.insecure, ca_file=creds.ca_file, cert_file=creds.cert_file,
            key_file=creds.key_file, username=creds.username,
            password=creds.password)
        name = creds.target or (device or "")
        channel = open_channel(endpoint, self.max_message_bytes)
        try:
            stub = gnmi_pb2_grpc.gNMIStub(channel)
            metadata = call_metadata(endpoint)
            notes = list(await self._get(stub, name, LLDP_PATH, metadata, label, required=True))
            for path in PORT_PATHS:
                notes += await self._get(stub, name, path, metadata, label, required=False)
        finally:
            await channel.close()
        return report_from_gnmi(label, leaves_of(notes), device)

    async def _get(self, stub: Any, name: str, path: str, metadata: Any, label: str,
                   required: bool) -> list[Any]:
        last: grpc.aio.AioRpcError | None = None
        for encoding in (gnmi_pb2.PROTO, gnmi_pb2.JSON_IETF):
            request = gnmi_pb2.GetRequest(prefix=gnmi_pb2.Path(target=name), path=[_path(path)],
                                          encoding=encoding)
            try:
                response = await stub.Get(request, metadata=metadata, timeout=self.timeout_s)
            except grpc.aio.AioRpcError as exc:
                last = exc
                if exc.code() in (grpc.StatusCode.UNIMPLEMENTED,
                                  grpc.StatusCode.INVALID_ARGUMENT):
                    continue
                break
            return list(response.notification)
        if required or last is None or last.code() not in _ABSENT:
            detail = f"{last.code().name}: {last.details()}" if last else "no answer"
            raise GnmiFetchError(f"gNMI target {label}: Get {path}: {detail}")
        return []
