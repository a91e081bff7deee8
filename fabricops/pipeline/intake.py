"""What a pipeline batch takes in: records decoded and checked, windows encoded, and
what the batch did (``BatchResult``).

Pure functions over bus records. A record that cannot be taken whole goes to
``dead`` (the worker dead-letters and counts it) with a reason; a part of a
good record that cannot be kept (unknown metrics, values out of range, an
INT path too long for the store) goes to ``reject`` with a count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fabricops.core.bus import Message
from fabricops.core.frame import Frame, FrameError, Source
from fabricops.core.frame_join import join_frames, sample_keys
from fabricops.core.intreport import IntBatch, IntBatchError
from fabricops.core.records import Event
from fabricops.core.wire_frame import EntityTables
from fabricops.pipeline.admit import LayoutChecks, admit_all
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.pipeline.keyframe import ENCODING, block_from_frames, encode_blocks, gauge_bounds
from fabricops.pipeline.windows import Origin
from fabricops.store.records import IntPathRecord, SegmentRecord, merge_int_paths, store_problem


@dataclass
class BatchResult:
    """What one batch did (the counts also go to the worker's metrics)."""

    frames: int = 0
    late: int = 0
    joined: int = 0
    events: list[Event] = field(default_factory=list)
    segments: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def n_events(self) -> int:
        return len(self.events)

    def reject(self, reason: str, n: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n


Dead = Callable[[Message, str, str], None]  # record, reason, why
Reject = Callable[[str, str, int], None]  # reason, why, count


def int_path_records(messages: Sequence[Message], book: IntPathBook, dead: Dead,
                     reject: Reject) -> list[IntPathRecord]:
    """The INT path records of ``messages`` (INT report batches), merged."""
    out: list[IntPathRecord] = []
    for msg in messages:
        try:
            records = book.records(IntBatch.decode(msg.value))
        except IntBatchError as exc:
            dead(msg, "undecodable_int", str(exc))
            continue
        for record in records:
            problem = store_problem(record)
            if problem:
                reject("unstorable_int_path", problem, 1)
            else:
                out.append(record)
    return merge_int_paths(out)


class FrameIntake:
    """What ``frames_of`` remembers between batches: each device's last entity table
    (see ``EntityTables``), whether the store can keep its names, and the checks of
    each metric column (``LayoutChecks``)."""

    def __init__(self) -> None:
        self.tables = EntityTables()
        self.storable: dict[str, tuple[str, ...]] = {}
        self.checks = LayoutChecks()

    def store_problem(self, frame: Frame) -> str | None:
        """``store_problem(frame)``, the device and entity names checked once per table
        (a frame of a known table: only its time and number)."""
        known = self.storable.get(frame.device) is frame.entities
        problem = store_problem(frame, names=not known)
        if problem is None and not known:
            if len(self.storable) >= self.tables.max_devices:
                self.storable.clear()
            self.storable[frame.device] = frame.entities
        return problem


def frames_of(messages: Sequence[Message], *, batch: int, limit_ns: int, dead: Dead,
              reject: Reject, intake: FrameIntake | None = None
              ) -> list[tuple[Frame, Origin]]:
    """The frames of ``messages`` with their origins; frames stamped after ``limit_ns``
    (past the allowed clock skew) or that the store cannot keep are dead. ``intake``
    carries what earlier batches checked."""
    good: list[tuple[Frame, Origin]] = []
    intake = intake or FrameIntake()
    for msg in messages:
        try:
            frame = Frame.decode(msg.value, intake.tables)
        except FrameError as exc:
            dead(msg, "undecodable", str(exc))
            continue
        if frame.ts_ns > limit_ns:
            dead(msg, "future", f"frame of {frame.device} at {frame.ts_ns} ns is "
                 f"{(frame.ts_ns - limit_ns) / 1e9:.0f} s past the allowed clock skew")
            continue
        problem = intake.store_problem(frame)
        if problem:
            dead(msg, "unstorable", problem)
            continue
        good.append((frame, (batch, (msg.topic, msg.partition), msg.offset)))
    out: list[tuple[Frame, Origin]] = []
    for (frame, dropped), (_, origin) in zip(
            admit_all([f for f, _ in good], intake.checks), good, strict=True):
        for d in dropped:
            reject(d.reason, d.detail, d.count)
        out.append((frame, origin))
    return out


def join_instants(frames: list[tuple[Frame, Origin]]) -> list[tuple[Frame, Origin, int]]:
    """``frames`` with the parts of each instant joined (``join_frames``), each with the
    number of parts it holds (1: a frame as it came).

    Parts are frames of one (device, source, ts_ns) from one partition, each giving
    a sample the earlier ones do not: a device that sent an instant in pieces. A
    frame adding nothing stays as it is (a copy: counted as a duplicate when it is
    accepted), and so does one from another partition (it keeps its own offset;
    it joins the window as a part, see ``Window.adds``). The joined frame takes the
    first part's place and the smallest offset of its parts.
    """
    first: dict[tuple[str, Source, int], int] = {}
    groups: dict[int, list[int]] = {}
    for i, (frame, _) in enumerate(frames):
        j = first.setdefault((frame.device, frame.source, frame.ts_ns), i)
        if j != i:
            groups.setdefault(j, [j]).append(i)
    out = [(frame, origin, 1) for frame, origin in frames]
    gone: set[int] = set()
    for j, members in groups.items():
        parts, held = [j], sample_keys([frames[j][0]])
        for i in members[1:]:
            frame, origin = frames[i]
            keys = sample_keys([frame])
            if origin[1] == frames[j][1][1] and not keys <= held:
                parts.append(i)
                held |= keys
        if len(parts) > 1:
            joined = join_frames([frames[p][0] for p in parts]).frame
            out[j] = (joined, min((frames[p][1] for p in parts), key=lambda o: o[2]),
                      len(parts))
            gone.update(parts[1:])
    return [fo for i, fo in enumerate(out) if i not in gone]


def segment_of(device: str, source: str, frames: list[Frame]) -> SegmentRecord:
    """One keyframe segment of a stream's frames (any order)."""
    return segments_of([(device, source, frames)])[0]


def segments_of(streams: Sequence[tuple[str, str, list[Frame]]]) -> list[SegmentRecord]:
    """``segment_of`` each (device, source, frames), encoded together (the same
    segments, in fewer array passes: ``encode_blocks``)."""
    blocks = [block_from_frames(sorted(frames, key=lambda f: f.ts_ns))
              for _, _, frames in streams]
    bounds = [gauge_bounds(block.metric) for block in blocks]
    payloads = encode_blocks(blocks, bounds)
    return [SegmentRecord(
        device=device, source=source, t_start_ns=int(block.ts_ns[0]),
        t_end_ns=int(block.ts_ns[-1]), first_seq=min(f.seq for f in frames),
        last_seq=max(f.seq for f in frames), n_points=len(block.ts_ns),
        n_series=len(block.entity), encoding=ENCODING,
        max_error=float(bound.max(initial=0.0)), payload=payload)
        for (device, source, frames), block, bound, payload
        in zip(streams, blocks, bounds, payloads, strict=True)]
