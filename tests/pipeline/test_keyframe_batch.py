"""Blocks encoded together (``encode_blocks``, ``segments_of``) give the bytes each
gives alone: the stacked mode and reference choices never let one block's series
change another's."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source
from fabricops.pipeline import keyframe_batch as kb
from fabricops.pipeline import keyframe_modes as km
from fabricops.pipeline import keyframe_pack as kp
from fabricops.pipeline import keyframe_refs as kr
from fabricops.pipeline.intake import segment_of, segments_of
from fabricops.pipeline.keyframe import (
    KeyframeError,
    SeriesBlock,
    decode_block,
    encode_block,
    encode_blocks,
    gauge_bounds,
)
from tests.pipeline.bench_modules import load_bench
from tests.pipeline.keyframe_blocks import port_block, references_of


@pytest.fixture(scope="module")
def noisy() -> ModuleType:
    return load_bench("noisy_telemetry")


def mixed_blocks(noisy: ModuleType) -> list[SeriesBlock]:
    """Windows of noisy switches (counters with wraps and resets, gauges, states), of
    ports whose packets follow their octets at jittered polls (each block its own
    intervals, so its own rate ratios), of other lengths, a block with one point, one
    without counters and one with a gauge kept exact (bound 0)."""
    shape = noisy.Shape(devices=6, ports=4, points=120)
    blocks = [b for _, b in noisy.noisy_blocks(3, shape, 30)]
    blocks += [port_block(ports=3, n=30, seed=s) for s in range(8)]
    blocks += [port_block(ports=2, n=n, seed=n) for n in (2, 3, 17)]
    # long enough for the modes to be screened on a sample of points (a merged segment)
    blocks += [port_block(ports=2, n=300, seed=s, reboot_at=None) for s in (1, 2)]
    first = blocks[0]
    counter = ~CATALOGUE.is_float[first.metric] & (first.metric != CATALOGUE.id_of("oper_status"))
    keep = np.flatnonzero(~counter)
    blocks.append(SeriesBlock(first.ts_ns, tuple(first.entity[i] for i in keep),
                              first.metric[keep], first.raw[keep], first.present[keep]))
    blocks.append(SeriesBlock(first.ts_ns[:1], first.entity, first.metric,
                              first.raw[:, :1], first.present[:, :1]))
    return blocks


def test_blocks_encoded_together_are_the_bytes_each_gives_alone(noisy: ModuleType) -> None:
    blocks = mixed_blocks(noisy)
    bounds: list[Any] = [gauge_bounds(b.metric) for b in blocks]
    bounds[1] = np.where(bounds[1] > 0, 0.0, bounds[1])  # exact gauges: XOR rows
    alone = [encode_block(b, g) for b, g in zip(blocks, bounds, strict=True)]
    together = encode_blocks(blocks, bounds)
    assert together == alone
    assert np.array_equal(decode_block(together[-7]).raw, blocks[-7].raw)
    assert encode_blocks(blocks[::-1], bounds[::-1]) == alone[::-1]
    for version in (1, 2):
        assert encode_blocks(blocks[:6], bounds[:6], version=version) == [
            encode_block(b, g, version=version) for b, g in zip(blocks[:6], bounds[:6],
                                                                 strict=True)]
    # the port blocks take references: the stacked choice had some to keep apart
    assert all(len(references_of(b)) for b in blocks[-15:-7])
    assert max(b.n_points for b in blocks) >= km.SCREEN_POINTS


def test_a_stacked_reference_choice_stays_within_its_block() -> None:
    """Every block numbers its entities from 0: served together, each block gets the
    references it gets alone (no row of another block, rows counted from its own)."""
    blocks = [port_block(ports=3, n=40, seed=s) for s in range(5)]
    asks = [kr.RefChoice(b.raw, np.repeat(np.arange(len(b.raw) // 2), 2)) for b in blocks]
    together = kr.RefChoice.serve(asks)
    alone = [kr.choose(a.x, a.entity) for a in asks]
    assert sum(len(r) for r in alone) >= 5
    for got, want in zip(together, alone, strict=True):
        assert np.array_equal(got.row, want.row)
        assert np.array_equal(got.ref, want.ref)
        assert np.array_equal(got.ratio, want.ratio)


def test_a_stacked_mode_choice_keeps_each_blocks_own_intervals() -> None:
    """The rate mode predicts from the block's own poll intervals: stacked blocks polled
    at other moments get their own residuals."""
    rng = np.random.default_rng(4)
    asks = []
    for _ in range(4):
        ts = np.cumsum(rng.integers(500_000_000, 1_500_000_000, 50))
        steps = rng.integers(10**6, 10**7, (6, 49)) * np.diff(ts)[None, :] // 10**9
        x = np.concatenate([np.zeros((6, 1), np.int64), np.cumsum(steps, axis=1)], axis=1)
        asks.append(km.ModeChoice(x.astype(np.uint64), True, kp.rate_ratio(ts)))
    together = km.ModeChoice.serve(asks)
    for (modes, e), ask in zip(together, asks, strict=True):
        want_modes, want_e = km.choose_residuals(ask.y, ask.order0, ask.ratio)
        assert np.array_equal(modes, want_modes)
        assert np.array_equal(e, want_e)
    assert any((modes == kp.RATE_MODE).any() for modes, _ in together)


def test_streams_written_together_are_the_segments_each_gives_alone(
        noisy: ModuleType) -> None:
    shape = noisy.Shape(devices=3, ports=2, points=20)
    streams = []
    for k, (device, block) in enumerate(noisy.noisy_blocks(5, shape, 20)):
        names = tuple(dict.fromkeys(block.entity))
        idx = np.array([names.index(e) for e in block.entity], np.uint32)
        frames = [Frame(device, int(t), Source.GNMI, 100 * k + i, names, idx, block.metric,
                        block.raw[:, i]) for i, t in enumerate(block.ts_ns)]
        streams.append((device, "gnmi", frames[::-1]))  # any order
    alone = [segment_of(*s) for s in streams]
    assert segments_of(streams) == alone
    assert [(g.device, g.first_seq, g.last_seq) for g in alone] == [
        (d, 100 * k, 100 * k + 19) for k, (d, _, _) in enumerate(streams)]


@dataclass(frozen=True)
class Double:
    """A request whose answer is twice its value; its key is its parity."""

    value: int
    size: int = 10

    @property
    def key(self) -> int:
        return self.value % 2

    @staticmethod
    def serve(requests: list[Double]) -> list[int]:
        SERVED.append([r.value for r in requests])
        return [2 * r.value for r in requests]


SERVED: list[list[int]] = []


def asker(*values: int) -> kb.Work[list[int]]:
    got = []
    for v in values:
        got.append((yield Double(v)))
    return got


def test_settle_all_serves_each_key_together_in_chunks_and_routes_the_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    SERVED.clear()
    monkeypatch.setattr(kb, "BATCH_VALUES", 25)
    works = [asker(1, 2), asker(3), asker(5, 4), asker(7, 9)]
    assert kb.settle_all(works) == [[2, 4], [6], [10, 8], [14, 18]]
    # first round: 1, 3, 5, 7 share a key, at most two of 10 values a call
    assert SERVED[:2] == [[1, 3], [5, 7]]
    assert sorted(map(sorted, SERVED[2:])) == [[2, 4], [9]]
    assert kb.settle(asker()) == []
    SERVED.clear()
    monkeypatch.setattr(kb, "BATCH_VALUES", 30)  # exactly three requests of 10 values
    assert kb.settle_all([asker(v) for v in (1, 3, 5, 7)]) == [[2], [6], [10], [14]]
    assert SERVED == [[1, 3, 5], [7]]


def test_a_writer_that_fails_fails_the_batch() -> None:
    def failing() -> kb.Work[None]:
        yield Double(1)
        raise ValueError("bad block")

    with pytest.raises(ValueError, match="bad block"):
        kb.settle_all([asker(1), failing()])
    with pytest.raises(ValueError, match="shorter"):
        encode_blocks([port_block(ports=1, n=5)], [])
    b = port_block(ports=1, n=5)
    with pytest.raises(KeyframeError, match=r"gauge bound -1\.0 "):
        encode_blocks([b, b], [0.0, -1.0])
