"""Store upkeep: old segments merged, telemetry past the retention deleted, in the background.

``StoreUpkeep`` runs one pass every ``interval_s`` on a thread of its own, the
first one ``interval_s`` after ``start``. A pass:

1. merges (``segment_merge.merge_segments``), when ``merge`` is on: each
   stream's one-window segments of the spans that ended ``merge_after_s``
   before the stream's own newest data become one segment per
   ``spans.span_s``, looking back ``spans.lookback_s`` (at most the retention, when
   pruning: what the prune deletes next is not merged first). Late frames for a span
   that recent are still written as usual; later ones are written beside the
   merged segment, never lost (see :mod:`.segment_merge`);
2. prunes (``Store.prune``, in batches of rows, so writers wait one batch at
   most), when ``prune`` is on: segments, events, INT paths and diagnosis
   revisions that ended more than the store's ``retention_s`` before *now*
   (``retention_now``): the wall clock or, if older, the median newest segment
   end of the live streams (those with data within the retention of the
   newest). From one pass to the next, and from what the store held at
   ``start``, now advances at most twice as fast as time passes, plus an
   hour. So a store of old data keeps its last ``retention_s``, one device
   stamping far ahead moves nothing, streams that stopped do not hold pruning
   back, and a clock that jumps ahead while the pipeline runs does not delete a
   week at once (one that jumped before it started, and had its telemetry
   written, does). A store without segments is not pruned.

``run_once`` is that pass, called directly by tests. A step that fails is
logged and counted in ``fabricops_store_upkeep_errors_total{step}``, and the
other step and the next pass still run: the upkeep never stops ingest.
``fabricops_store_upkeep_last_success_timestamp_seconds`` is the time of the
last pass whose steps all went through (the alert ``FabricopsStoreUpkeepBehind``
reads it), ``fabricops_store_upkeep_prune_now_timestamp_seconds`` the now the
last prune used. The thread ends only on ``stop``; if it ends otherwise (a bug
outside the steps), ``Liveness`` names it dead (``/ready``) and the command
exits non-zero.

With ``owned`` (the pipeline's: the streams its worker is consuming), a pass
merges only those streams, so workers sharing a store split the merging as
they split the partitions; a stream nobody consumes any more keeps its last
hour unmerged. Several processes may keep one store: a merge skips a span
another writer changed, and pruning is idempotent. The merge runs in the
pipeline's process and shares its interpreter lock with ingest.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Final, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.liveness import Liveness
from fabricops.pipeline.segment_merge import MergeConfig, MergeResult, S, merge_segments
from fabricops.store.store import Store, StoreError

log = logging.getLogger(__name__)
WORKER: Final = "store-upkeep"
"""The name the thread has in ``Liveness`` (``/ready``)."""
STEPS: Final = ("merge", "prune")
T = TypeVar("T")


class UpkeepConfig(BaseModel):
    """How the pipeline keeps its store: merging old segments, deleting expired ones."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="run passes on a thread of the pipeline")
    interval_s: float = Field(600.0, gt=0, description="seconds between two passes")
    merge: bool = Field(True, description="merge old one-window segments")
    merge_after_s: float = Field(3600.0, ge=0,
                                 description="merge a span once it ended this long before "
                                             "its stream's newest data")
    spans: MergeConfig = Field(default_factory=MergeConfig,
                               description="span length, lookback and batch of the merge")
    prune: bool = Field(True, description="delete telemetry past the store's retention_s")


class UpkeepMetrics:
    """Passes, failed steps, what the merge did and when a pass last went through."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.passes = Counter("fabricops_store_upkeep_passes", "Store upkeep passes run",
                              registry=registry)
        self.errors = Counter("fabricops_store_upkeep_errors",
                              "Upkeep steps that failed (the next pass tries again)",
                              ["step"], registry=registry)
        self.merged = Counter("fabricops_store_upkeep_merged_segments",
                              "One-window segments merged into span segments",
                              registry=registry)
        self.spans = Counter("fabricops_store_upkeep_merged_spans",
                             "Span segments the merges wrote", registry=registry)
        self.skipped = Counter("fabricops_store_upkeep_skipped_spans",
                               "Spans a merge left as they were, by reason", ["reason"],
                               registry=registry)
        self.pruned = Counter("fabricops_store_upkeep_pruned_rows",
                              "Rows deleted past the retention", registry=registry)
        self.prune_now = Gauge("fabricops_store_upkeep_prune_now_timestamp_seconds",
                               "The 'now' the last prune deleted up to the retention before "
                               "(0: none yet); far behind the wall clock means pruning lags",
                               registry=registry)
        self.last_success = Gauge("fabricops_store_upkeep_last_success_timestamp_seconds",
                                  "Wall-clock time of the last pass whose steps all went "
                                  "through (0: none yet)", registry=registry)
        for step in STEPS:
            self.errors.labels(step)


class StoreUpkeep:
    """See the module docstring. Inert until ``start``."""

    def __init__(self, config: UpkeepConfig, store: Store,
                 registry: CollectorRegistry | None = None, liveness: Liveness | None = None,
                 clock_ns: Callable[[], int] = time.time_ns,
                 owned: Callable[[], Collection[tuple[str, str]]] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.monotonic = monotonic
        self.store = store
        self.owned = owned
        self.liveness = liveness
        self.clock_ns = clock_ns
        self.metrics = UpkeepMetrics(registry if registry is not None else CollectorRegistry())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pruned_at: tuple[int, float] | None = None  # (now used, monotonic s)
        self._marks: dict[tuple[str, str], int] | None = None  # this pass's watermarks

    def run_once(self) -> tuple[MergeResult | None, int | None]:
        """One pass: (what the merge did, rows pruned), None for a step that is off,
        failed (logged and counted) or was not reached before ``stop``."""
        self._marks = None
        merged = self._step("merge", self._merge) if self.config.merge else None
        pruned = self._step("prune", self._prune) \
            if self.config.prune and not self._stop.is_set() else None
        self.metrics.passes.inc()
        if (merged is not None or not self.config.merge) and \
                (pruned is not None or not self.config.prune):
            self.metrics.last_success.set(time.time())
        return merged, pruned

    def start(self) -> None:
        """Note "now" as the store has it (the first prune advances from there), then run
        a pass every ``interval_s`` on a thread until ``stop`` (nothing if off)."""
        if not self.config.enabled or self._thread is not None:
            return
        self._stop.clear()
        self._seed()
        self._thread = threading.Thread(target=self._run, name=WORKER, daemon=True)
        if self.liveness is not None:
            self.liveness.alive(WORKER)
        self._thread.start()

    def stopping(self) -> None:
        """Ask the thread to stop after the batch in progress, without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        """Stop after the batch in progress (a merge stops at its next stream, a prune at
        its next batch of rows), and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
            if self._thread.is_alive():
                log.warning("store upkeep: still in a step after 60 s; left to end alone")
            self._thread = None
        if self.liveness is not None:
            self.liveness.forget(WORKER)

    def _seed(self) -> None:
        if not self.config.prune:
            return
        try:
            now = retention_now(self.store.segment_watermarks(), self.clock_ns(),
                                self.store.config.retention_s)
        except StoreError as exc:
            log.warning("store upkeep: cannot read the store yet (%s); the first prune "
                        "takes now as it finds it", exc)
            return
        if now:
            self._pruned_at = (now, self.monotonic())

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.config.interval_s):
                self.run_once()
        except BaseException as exc:  # run_once catches what a step raises: a bug around it
            log.exception("store upkeep: the thread ended; no more merges or pruning")
            if self.liveness is not None:
                self.liveness.dead(WORKER, f"store upkeep thread ended: "
                                           f"{type(exc).__name__}: {exc}")

    def _step(self, step: str, work: Callable[[], T]) -> T | None:
        """``work()``, or None if it failed: logged and counted, tried again next pass.
        A step that keeps failing never stops ingest; the alert on
        ``last_success`` tells."""
        t0 = time.thread_time()
        try:
            out = work()
        except Exception as exc:
            self.metrics.errors.labels(step).inc()
            transient = isinstance(exc, StoreError) and exc.transient
            log.exception("store upkeep: %s failed%s; trying again in %g s", step,
                          " (database busy or away)" if transient else "",
                          self.config.interval_s)
            return None
        log.debug("store upkeep: %s took %.2f CPU-s", step, time.thread_time() - t0)
        return out

    def _watermarks(self) -> dict[tuple[str, str], int]:
        """The store's per-stream newest segment ends, read once a pass (a step whose
        read failed leaves it to the next step to read)."""
        if self._marks is None:
            self._marks = self.store.segment_watermarks()
        return self._marks

    def _merge(self) -> MergeResult:
        spans = self.config.spans
        if self.config.prune and spans.lookback_s > self.store.config.retention_s:
            # what the prune deletes next is not worth merging first
            spans = spans.model_copy(update={"lookback_s": self.store.config.retention_s})
        result = merge_segments(self.store, age_ns=round(self.config.merge_after_s * S),
                                config=spans, stop=self._stop.is_set,
                                only=None if self.owned is None else self.owned(),
                                watermarks=self._watermarks())
        m = self.metrics
        m.merged.inc(result.segments_in)
        m.spans.inc(result.spans)
        for why, n in result.skipped.items():
            m.skipped.labels(why).inc(n)
        if result.spans:
            log.info("store upkeep: %d segments merged into %d (%d -> %d bytes)",
                     result.segments_in, result.spans, result.bytes_in, result.bytes_out)
        return result

    def _prune(self) -> int:
        """``prune_expired``, with "now" advancing at most twice as fast as time passes
        (plus an hour) from the pass before, or from what the store held at ``start``."""
        now = self.clock_ns()
        mono = self.monotonic()
        if self._pruned_at is not None:
            last, then = self._pruned_at
            now = min(now, last + round((2 * (mono - then) + 3600) * S))
        deleted, used = prune_expired(self.store, now, stop=self._stop.is_set,
                                      watermarks=self._watermarks())
        if used:
            self._pruned_at = (used, mono)
            self.metrics.prune_now.set(used / S)
        self.metrics.pruned.inc(deleted)
        if deleted:
            log.info("store upkeep: %d rows older than %g s deleted", deleted,
                     self.store.config.retention_s)
        return deleted


def retention_now(newest: Mapping[tuple[str, str], int], now_ns: int,
                  retention_s: float) -> int:
    """"Now" for the retention: ``now_ns`` or, if older, the median of the newest
    segment ends of the live streams, those that ended within ``retention_s`` of the
    newest (or of ``now_ns``, if older). 0 without a stream. One device stamping far
    ahead does not move it; streams that stopped do not hold it back."""
    if not newest:
        return 0
    top = min(now_ns, max(newest.values()))
    live = sorted(t for t in newest.values() if t >= top - round(retention_s * S))
    return min(now_ns, live[(len(live) - 1) // 2])


def prune_expired(store: Store, now_ns: int, stop: Callable[[], bool] | None = None,
                  watermarks: Mapping[tuple[str, str], int] | None = None
                  ) -> tuple[int, int]:
    """Delete what ended ``store.config.retention_s`` before ``retention_now`` of the
    store's streams and ``now_ns``: (rows deleted, the now used; 0 when no segment is
    stored, and then nothing is deleted). ``stop`` as for ``Store.prune``;
    ``watermarks`` as for ``segment_merge.merge_segments``."""
    marks = store.segment_watermarks() if watermarks is None else watermarks
    now = retention_now(marks, now_ns, store.config.retention_s)
    if not now:
        return 0, 0
    return store.prune(now_ns=now, stop=stop), now


__all__ = ["WORKER", "StoreUpkeep", "UpkeepConfig", "UpkeepMetrics", "prune_expired",
           "retention_now"]
