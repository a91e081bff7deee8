"""The API half of ``fabricops up``: REST, /metrics, fault injection and alerts.

Without ``--api-token`` a fresh token is made for the run and written to
``fabricops-data/api.token`` (mode 0600), where ``fabricops sim inject`` and
other local commands find it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from fabricops.api.alerts import AlertDispatcher, AlertReceiver, AlertsConfig
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.server import ApiServer
from fabricops.api.sim_injector import SimFaultInjector
from fabricops.cli.api_client import TOKEN_FILE
from fabricops.cli.lifecycle import Running
from fabricops.cli.preflight import named
from fabricops.core.bus import Bus
from fabricops.simulator.agents.service import SimulatedFabric
from fabricops.store.store import Store


def api_token(given: str, token_file: Path = TOKEN_FILE) -> str:
    """``given``, or a new random token written to ``token_file`` for local commands."""
    if given:
        return given
    token = secrets.token_urlsafe(24)
    token_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")
    return token


def alerts_config(config: AlertsConfig, webhook: AlertReceiver | None,
                  external_url: str) -> AlertsConfig:
    """The receivers of ``--alerts FILE`` plus ``--webhook URL`` (named ``webhook``)."""
    receivers = [*config.receivers, *([webhook] if webhook is not None else [])]
    return AlertsConfig.model_validate({
        **config.model_dump(), "receivers": [r.model_dump() for r in receivers],
        "external_url": config.external_url or external_url})


def start_alerts(running: Running, config: AlertsConfig, bus: Bus,
                 store: Store) -> AlertDispatcher:
    """Deliver diagnoses and actions to the receivers of ``config``, from ``store``'s
    outbox."""
    alerts = AlertDispatcher(config, bus, store, running.registry, liveness=running.liveness)
    alerts.start()
    running.started(alerts.stop)
    return alerts


def start_api(running: Running, ctx: ApiContext, port_flag: str) -> ApiServer:
    """Serve the API of ``ctx``; a failure to listen names ``port_flag``."""
    server = ApiServer(ctx)
    with named(port_flag, ctx.config.port):
        server.start()
    running.started(server.stop)
    return server


def start_fabric_api(running: Running, store: Store, fabric: SimulatedFabric, *,
                     host: str, port: int, token: str) -> ApiServer:
    """Serve the API for the simulated ``fabric`` on ``--api-host``/``--api-port``."""
    config = ApiConfig.model_validate({"host": host, "port": port, "token": token})
    ctx = ApiContext(config=config, store=store, topology=fabric.sim.fabric.topology,
                     registry=running.registry, injector=SimFaultInjector(fabric),
                     liveness=running.liveness)
    return start_api(running, ctx, "--api-port")
