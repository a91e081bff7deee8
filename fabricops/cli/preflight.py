"""Checks a long-running command makes before it starts anything.

Each check either returns the value to start with or raises ``StartupError``
whose message names the flag (or file), the value and the cause, ready to be
the one ``error:`` line the command prints. Nothing here starts a thread or
keeps a socket: a port is checked by binding it and closing it at once, a
Kafka bootstrap by opening a TCP connection to it.
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from fabricops.api.alert_config import (
    AlertReceiver,
    AlertsConfig,
    AlertsConfigError,
    describe_validation,
    load_alerts_config,
)
from fabricops.api.server import ApiServerError
from fabricops.cli.common import error_message, user_error_types
from fabricops.core.inventory import check_host_port
from fabricops.store.database import DatabaseUrlError, display_url, parse_url
from fabricops.store.store import StoreError

#: How long one bootstrap server is given to accept a TCP connection.
BOOTSTRAP_TIMEOUT_S = 2.0


class StartupError(ValueError):
    """A flag or file a command cannot start with; the message names it and the cause."""


def startup_errors() -> tuple[type[Exception], ...]:
    """What a command's start-up may raise that says the input or the host is at fault."""
    return (StartupError, *user_error_types(), StoreError, ApiServerError)


def checked_db(url: str, flag: str = "--db") -> str:
    """``url`` if it is a SQLite or PostgreSQL URL; for a SQLite file, its folder is made."""
    shown = display_url(url)
    try:
        make_url(url)
    except ArgumentError:
        raise StartupError(f"{flag} {shown}: not a database URL (sqlite:///FILE or "
                           f"postgresql://USER@HOST/DB)") from None
    try:
        parse_url(url)
    except DatabaseUrlError:
        raise StartupError(f"{flag} {shown}: only sqlite:/// and postgresql:// URLs are "
                           f"supported") from None
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        folder = Path(url.removeprefix("sqlite:///")).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StartupError(f"{flag} {shown}: cannot create folder {folder}: "
                               f"{exc.strerror}") from None
    return url


def checked_alerts(path: Path | None, flag: str = "--alerts") -> AlertsConfig:
    """The alert receivers of the file ``path`` (none without a file)."""
    if path is None:
        return AlertsConfig()
    try:
        return load_alerts_config(path)
    except AlertsConfigError as exc:
        raise StartupError(f"{flag} {exc}") from None


def checked_webhook(url: str, secret: str, flag: str = "--webhook") -> AlertReceiver:
    """The receiver named ``webhook`` that ``--webhook URL`` adds."""
    try:
        return AlertReceiver.model_validate({"name": "webhook", "url": url, "secret": secret})
    except ValidationError as exc:
        raise StartupError(f"{flag} {url}: {describe_validation(exc, with_place=False)}") \
            from None


def free_port(flag: str, host: str, port: int, *, udp: bool = False) -> int:
    """``port`` if ``host:port`` can be bound now, or a free port when ``port`` is 0.

    The port is bound as the servers here bind theirs (TCP with SO_REUSEADDR)
    and closed at once; StartupError names ``flag`` when it is taken.
    """
    kind = socket.SOCK_DGRAM if udp else socket.SOCK_STREAM
    try:
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=kind,
                                                      flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise StartupError(f"{flag} {port}: cannot resolve the address {host!r}: "
                           f"{exc.strerror}") from None
    with socket.socket(family, kind) as sock:
        if not udp:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            cause = ("already in use" if exc.errno == errno.EADDRINUSE
                     else f"cannot be bound: {exc.strerror}")
            raise StartupError(f"{flag} {port}: {'UDP' if udp else 'TCP'} "
                               f"{host}:{port} {cause}") from None
        return int(sock.getsockname()[1])


def reachable_bootstrap(servers: str, flag: str = "--bootstrap",
                        timeout_s: float = BOOTSTRAP_TIMEOUT_S) -> str:
    """``servers`` (``host:port[,host:port]``) if one of them accepts a TCP connection."""
    addresses = [s.strip() for s in servers.split(",") if s.strip()]
    if not addresses:
        raise StartupError(f"{flag} {servers!r}: no host:port given")
    causes = []
    for address in addresses:
        try:
            host, port = check_host_port(address).rsplit(":", 1)
        except ValueError as exc:
            raise StartupError(f"{flag} {servers}: {exc}") from None
        started = time.monotonic()
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return servers
        except OSError as exc:
            waited = time.monotonic() - started
            causes.append(f"{address}: {_connect_cause(exc, waited)}")
    raise StartupError(f"{flag} {servers}: no Kafka broker answers ({'; '.join(causes)})")


def _connect_cause(exc: OSError, waited_s: float) -> str:
    if isinstance(exc, TimeoutError) or exc.errno == errno.ETIMEDOUT:
        return f"no answer in {waited_s:.1f} s"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve: {exc.strerror}"
    return (exc.strerror or str(exc)).lower()


@contextmanager
def named(flag: str, value: object) -> Iterator[None]:
    """Errors raised inside become a StartupError naming ``flag`` and ``value``."""
    try:
        yield
    except StartupError:
        raise
    except startup_errors() as exc:
        cause = error_message(exc)
        shown = f"{value}: "
        if shown in cause:
            cause = cause.split(shown, 1)[1]
        raise StartupError(f"{flag} {value}: {cause}") from exc
