"""The retry backoff: doubling from its first wait, never past its cap, jittered downwards."""

from __future__ import annotations

import random

import pytest

from fabricops.core.backoff import Backoff

DEVICE = Backoff(initial_s=0.5, max_s=5.0, jitter=0.2)  # the collectors' defaults


def test_waits_double_from_the_first_and_stop_at_the_cap() -> None:
    assert [DEVICE.base_s(n) for n in range(0, 8)] == [0.5, 0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert DEVICE.base_s(10**9) == 5.0


def test_jitter_only_shortens_a_wait_and_spreads_peers_at_the_cap() -> None:
    rng = random.Random(7)
    for n in range(1, 40):
        waits = [DEVICE.delay_s(n, rng) for _ in range(200)]
        base = DEVICE.base_s(n)
        assert all(0.8 * base <= w <= base for w in waits), n
    at_cap = [DEVICE.delay_s(50, rng) for _ in range(1000)]
    assert max(at_cap) <= 5.0
    assert min(at_cap) < 4.2, "peers that failed together spread out"
    assert max(at_cap) > 4.8


def test_a_seeded_rng_gives_the_same_waits() -> None:
    first = [DEVICE.delay_s(n, random.Random(3)) for n in range(10)]
    assert first == [DEVICE.delay_s(n, random.Random(3)) for n in range(10)]
    assert Backoff(0.5, 5.0, jitter=0.0).delay_s(3, random.Random()) == 2.0


@pytest.mark.parametrize("seed", range(20))
def test_a_peer_back_after_a_minute_is_tried_again_within_the_cap(seed: int) -> None:
    rng = random.Random(seed)
    for back_s in (60.0 + k * 0.37 for k in range(15)):  # anywhere in the retry cycle
        t, failures = 0.0, 0
        while t < back_s:  # each try fails at once (the peer refuses)
            failures += 1
            t += DEVICE.delay_s(failures, rng)
        assert t - back_s <= 5.0


@pytest.mark.parametrize(("initial_s", "max_s", "jitter"),
                         [(-1.0, 5.0, 0.2), (6.0, 5.0, 0.2), (0.5, 5.0, 1.0), (0.5, 5.0, -0.1)])
def test_nonsense_is_refused(initial_s: float, max_s: float, jitter: float) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(initial_s, max_s, jitter)
