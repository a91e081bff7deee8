"""``fabricops store``: maintenance of the store (merging old segments, deleting expired
telemetry). ``fabricops serve pipeline`` does both every ten minutes unless
``--no-upkeep``."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fabricops.cli.common import AsJson, fail, progress_bar, stdout_console, user_errors
from fabricops.cli.query import DEFAULT_DB, Db, opened, parse_duration, parse_retention
from fabricops.core.wording import counted

app = typer.Typer(no_args_is_help=True, help=(
    "Maintain the store the pipeline writes. Safe while the pipeline runs, which does "
    "the same every ten minutes (fabricops serve pipeline --no-upkeep turns it off)."))


@app.command("merge")
def merge(db: Db = DEFAULT_DB,
          older_than: Annotated[str, typer.Option(
              "--older-than", help="Merge spans that ended this long before their stream's "
              "newest data (late frames for them are still stored): 90m, 2h, 1d")]
          = "1h",
          span: Annotated[str, typer.Option(
              help="One segment per stream and aligned span of this length, dividing an "
              "hour: 10m, 30m, 1h")] = "10m",
          lookback: Annotated[str, typer.Option(
              help="Look at spans at most this far before the cutoff (a first run on a "
              "long history: more, e.g. 30d)")] = "1d",
          as_json: AsJson = False) -> None:
    """Merge each stream's old one-minute segments into one segment per span.

    The points stay the same (counters bit for bit, gauges as stored); the
    segments take fewer bytes (each no longer repeats keyframes and names) and
    the store fewer rows. A span a writer changes meanwhile is skipped, not
    lost; running it again merges what is left. The pipeline does this every
    ten minutes with a day's lookback; run it by hand once with --lookback 30d
    on a store older than that, or from a timer where pipelines run with
    --no-upkeep.
    """
    from fabricops.pipeline.segment_merge import (
        MAX_SPAN_S,
        MergeConfig,
        divides_an_hour,
        merge_segments,
    )

    with user_errors():
        try:
            age_ns = round(parse_duration(older_than, "--older-than") * 1e9)
            span_s = parse_duration(span, "--span")
            lookback_s = parse_duration(lookback, "--lookback")
        except ValueError as exc:
            raise fail(str(exc)) from None
        if not 60 <= span_s <= MAX_SPAN_S or not divides_an_hour(span_s):
            raise fail(f"--span {span!r}: expected 1m to 1h, dividing an hour (10m, 15m, 30m)")
        if lookback_s <= 0:
            raise fail(f"--lookback {lookback!r}: expected more than 0")
        config = MergeConfig(span_s=span_s, lookback_s=lookback_s)
    with opened(db) as store, user_errors(), progress_bar("merging streams") as update:
        result = merge_segments(store, age_ns=age_ns, config=config, progress=update)
    if as_json:
        typer.echo(json.dumps({"spans": result.spans, "segments_in": result.segments_in,
                               "bytes_in": result.bytes_in, "bytes_out": result.bytes_out,
                               "points": result.points, "samples": result.samples,
                               "skipped": result.skipped}))
        return
    out = stdout_console()
    if not result.spans and not result.skipped:
        out.print("nothing to merge: every span older than that is one segment already")
    elif not result.spans:
        out.print("nothing merged")
    else:
        saved = 1 - result.bytes_out / result.bytes_in
        out.print(f"merged {counted(result.segments_in, 'segment')} into {result.spans:,} "
                  f"({counted(result.samples, 'sample')}, unchanged)")
        out.print(f"bytes: {result.bytes_in:,} -> {result.bytes_out:,} ({saved:.0%} smaller)")
    for why, n in sorted(result.skipped.items()):
        out.print(f"left as they are: {counted(n, 'span')} ({why})")


@app.command("prune")
def prune(db: Db = DEFAULT_DB,
          retention: Annotated[str, typer.Option(
              help="Delete what is older than this, before now (or before the newest "
              "telemetry stored, if older): 12h, 7d, 30d")] = "7d",
          as_json: AsJson = False) -> None:
    """Delete what is past the retention: segments, events, INT paths, diagnosis revisions.

    Actions and their log stay. "Now" is the wall clock or, if older, the
    median newest data of the live streams: a store of old data (and nothing
    newer) keeps its last --retention. Rows go in batches, so the pipeline
    keeps writing meanwhile. The file does not shrink: the space is reused.
    """
    import time

    from fabricops.pipeline.upkeep import prune_expired
    from fabricops.store.store import StoreError

    with user_errors():
        try:
            retention_s = parse_retention(retention)
        except ValueError as exc:
            raise fail(str(exc)) from None
    with opened(db, retention_s) as store, user_errors():
        try:
            deleted, _ = prune_expired(store, time.time_ns())
        except StoreError as exc:
            again = "; try again (what was deleted stays deleted)" if exc.transient else ""
            raise fail(f"{exc}{again}") from None
    if as_json:
        typer.echo(json.dumps({"deleted_rows": deleted, "retention_s": retention_s}))
        return
    stdout_console().print(f"deleted {counted(deleted, 'row')} older than {retention}"
                           if deleted else f"nothing older than {retention}")
