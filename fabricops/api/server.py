"""ApiServer: the API on a uvicorn server in a background thread.

``start`` returns once the socket listens (``port`` is then the bound port,
useful with port 0); ``stop`` lets in-flight requests finish and closes it.
With a ``Liveness`` in the context the server is the worker ``api``: alive once
listening, dead if it stops serving without ``stop`` being called.
"""

from __future__ import annotations

import logging
import threading
import time

import uvicorn

from fabricops.api.app import create_app
from fabricops.api.context import ApiContext

log = logging.getLogger(__name__)

#: The name of the API's worker in the process's ``Liveness``.
WORKER = "api"


def api_url(host: str, port: int) -> str:
    """The URL a local client reaches an API listening on ``host:port`` at."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://{shown}:{port}"


class ApiServerError(RuntimeError):
    """The API could not start listening; the message names the address and cause."""


class ApiServer:
    """See the module docstring."""

    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx
        self.port = ctx.config.port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        return api_url(self.ctx.config.host, self.port)

    def start(self, timeout_s: float = 10.0) -> None:
        """Listen, or ApiServerError naming the address once the server has given up."""
        cfg = self.ctx.config
        config = uvicorn.Config(create_app(self.ctx), host=cfg.host, port=cfg.port,
                                log_level="warning", access_log=False, lifespan="off")
        server = uvicorn.Server(config)
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(target=self._serve, args=(server,), name="api",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ApiServerError(f"the API could not listen on {cfg.host}:{cfg.port} "
                                     f"(is the port in use?)")
            time.sleep(0.02)
        sockets = [s for srv in server.servers for s in srv.sockets]
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        if self.ctx.liveness is not None:
            self.ctx.liveness.alive(WORKER)
        log.info("api: listening on %s", self.url)

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        self._server = self._thread = None
        if self.ctx.liveness is not None:
            self.ctx.liveness.forget(WORKER)

    def _serve(self, server: uvicorn.Server) -> None:
        reason = "the HTTP server stopped serving"
        try:
            server.run()
        except BaseException as exc:
            reason = f"the HTTP server failed: {type(exc).__name__}: {exc}"
        if server.started and not self._stopping.is_set() and self.ctx.liveness is not None:
            self.ctx.liveness.dead(WORKER, reason)
