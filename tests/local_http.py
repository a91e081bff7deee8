"""A threaded HTTP server on loopback for tests: start it with a handler, stop it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(handler: type[BaseHTTPRequestHandler], port: int = 0) -> ThreadingHTTPServer:
    """Serve ``handler`` on 127.0.0.1:``port`` (0: any free port) in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server


def shut(server: ThreadingHTTPServer | None) -> None:
    """Stop serving and close the socket (None: nothing to do)."""
    if server is not None:
        server.shutdown()
        server.server_close()
