"""One frame from the parts of one device's instant.

A device may send one collection instant in parts: a gNMI target sends a
notification per interface or per container (counters, state, optics), each
stamped with the instant's timestamp. Everything after collection knows an
instant by (device, source, ts_ns): a second frame with that identity is taken
for a duplicate. So the parts are joined into one frame first, by the gNMI
collector as they arrive, and again by the pipeline's intake for parts that
still reach the bus apart.

``join_frames`` is pure: its result depends only on the parts and their order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fabricops.core.frame import Frame, FrameError


class Joined(NamedTuple):
    """The joined frame, and how many samples a later part's replaced."""

    frame: Frame
    repeats: int


def join_frames(parts: Sequence[Frame], seq: int | None = None, *,
                later_wins: bool = True) -> Joined:
    """One frame holding every sample of ``parts``: the device, source and time of the
    first part, its sequence number unless ``seq`` is given, every part's entities in
    the order they first appear, samples in part order.

    A sample whose entity and metric a later part (or a later sample) gives again is
    replaced by it, as a gNMI target's later notification of an instant updates the
    earlier one (``later_wins=False``: the first is kept, as a store keeps what it
    holds); the samples so left out are counted (``repeats``). FrameError if the
    parts are not of one device, source and ts_ns.
    """
    if not parts:
        raise FrameError("no frames to join")
    first = parts[0]
    for part in parts[1:]:
        if (part.device, part.source, part.ts_ns) != (first.device, first.source, first.ts_ns):
            raise FrameError(f"cannot join a frame of {part.device!r} ({part.source}) at "
                             f"{part.ts_ns} ns to one of {first.device!r} ({first.source}) "
                             f"at {first.ts_ns} ns: parts are of one device and instant")
    seq = first.seq if seq is None else seq
    if len(parts) == 1:
        return Joined(first if seq == first.seq else first.again(first.ts_ns, seq, first.raw), 0)
    index: dict[str, int] = {}
    entity_idx = []
    for part in parts:
        remap = np.fromiter((index.setdefault(e, len(index)) for e in part.entities),
                            np.uint32, len(part.entities))
        entity_idx.append(remap[part.entity_idx])
    idx = np.concatenate(entity_idx)
    metric = np.concatenate([p.metric for p in parts])
    raw = np.concatenate([p.raw for p in parts])
    key = idx.astype(np.uint64) << np.uint64(16) | metric
    if later_wins:  # each sample's last occurrence
        _, last = np.unique(key[::-1], return_index=True)
        keep = len(idx) - 1 - last
    else:
        _, keep = np.unique(key, return_index=True)
    repeats = len(idx) - len(keep)
    if repeats:
        keep = np.sort(keep)
        idx, metric, raw = idx[keep], metric[keep], raw[keep]
    frame = Frame(first.device, first.ts_ns, first.source, seq, tuple(index), idx, metric, raw)
    return Joined(frame, repeats)


def sample_keys(frames: Sequence[Frame]) -> set[tuple[str, int]]:
    """The (entity name, metric id) of every sample of ``frames``."""
    keys: set[tuple[str, int]] = set()
    for frame in frames:
        names = frame.entities
        keys.update(zip([names[i] for i in frame.entity_idx.tolist()], frame.metric.tolist(),
                        strict=True))
    return keys


def adds_samples(held: Sequence[Frame], frame: Frame) -> bool:
    """Whether ``frame`` gives a sample (entity and metric) that none of ``held`` does:
    a part of an instant they hold, not a copy of one of them."""
    return not sample_keys([frame]) <= sample_keys(held)


__all__ = ["Joined", "adds_samples", "join_frames", "sample_keys"]
