"""The API half of ``fabricops up``: REST, /metrics and fault injection on loopback.

Without ``--api-token`` a fresh token is made for the run and written to
``fabricops-data/api.token`` (mode 0600), where ``fabricops sim inject`` and
other local commands find it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from prometheus_client import CollectorRegistry

from fabricops.api.alerts import AlertReceiver, AlertsConfig, load_alerts_config
from fabricops.api.context import ApiConfig, ApiContext
from fabricops.api.server import ApiServer
from fabricops.api.sim_injector import SimFaultInjector
from fabricops.cli.api_client import TOKEN_FILE
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


def alerts_config(alerts_file: Path | None, webhook: str, secret: str,
                  external_url: str) -> AlertsConfig:
    """The receivers of ``--alerts FILE`` plus ``--webhook URL`` (named ``webhook``)."""
    config = load_alerts_config(alerts_file) if alerts_file else AlertsConfig()
    receivers = list(config.receivers)
    if webhook:
        receivers.append(AlertReceiver.model_validate(
            {"name": "webhook", "url": webhook, "secret": secret}))
    return config.model_copy(update={"receivers": tuple(receivers),
                                     "external_url": config.external_url or external_url})


def start_api(store: Store, fabric: SimulatedFabric, registry: CollectorRegistry, *,
              host: str, port: int, token: str) -> ApiServer:
    """Serve the API for the simulated ``fabric``; return the started server."""
    config = ApiConfig.model_validate({"host": host, "port": port, "token": token})
    ctx = ApiContext(config=config, store=store, topology=fabric.sim.fabric.topology,
                     registry=registry, injector=SimFaultInjector(fabric))
    server = ApiServer(ctx)
    server.start()
    return server
