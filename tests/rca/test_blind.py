"""A switch that stops reporting but forwards on, with one of its links down or
flapping: the link is named from the end that still reports, not taken for the
switch's echo."""

from __future__ import annotations

import numpy as np
import pytest

from fabricops.rca.blind import LINK_DOWN, LINK_FLAP, NBR_DOWN, blind_links, name_blind_links
from fabricops.rca.detect import STOPPED, Symptom
from fabricops.rca.engine import StepResult
from fabricops.rca.features import FEATURES
from fabricops.simulator.faults import FaultSpec, FaultType
from tests.rca.twin import run_engine


def _run(blind: str, fault: FaultSpec | None, ticks: int = 24) -> list[StepResult]:
    """Steps of an engine fed a fat-tree whose switch ``blind`` stops reporting at tick
    12 and forwards on; ``fault`` starts at 15 s."""
    return run_engine(fault, ticks, withheld={blind})[1]


@pytest.mark.parametrize(("blind", "link"), [
    ("agg-0-0", "agg-0-0:eth1~leaf-0-0:eth3"),  # seen down by the leaf below
    ("agg-0-0", "agg-0-0:eth3~core-0:eth1"),  # by the core above
    ("leaf-0-0", "host-000:nic0~leaf-0-0:eth1"),  # by the host
])
def test_a_link_down_at_a_blind_switch_is_named_from_its_other_end(blind: str,
                                                                    link: str) -> None:
    steps = _run(blind, FaultSpec(type=FaultType.LINK_DOWN, entity=link, start_s=15.0))
    late = steps[-1]
    assert [s.rule for s in late.symptoms].count(STOPPED) == 1, "the switch is silent"
    assert [(d.root, d.fault_type) for d in late.diagnoses] == [(link, "link_down")]
    d = late.diagnoses[0]
    assert blind in d.missing, "the blind switch is named as missing telemetry"
    assert 0.5 <= d.confidence < 0.9, "lowered: one end's account, the other end blind"
    assert d.action, "an action is proposed"
    named = [s.diagnoses[0].root for s in steps[12:] if s.diagnoses]
    assert set(named) == {link}, "never the switch or another link"


def test_a_link_flapping_at_a_blind_switch_is_named_a_flap_once_it_flaps() -> None:
    """Its first change looks like a link going down; every step after names a flap,
    not a link down one step and nothing the next, as the link goes up and down."""
    link = "agg-0-0:eth1~leaf-0-0:eth3"
    steps = _run("agg-0-0", FaultSpec(type=FaultType.LINK_FLAP, entity=link, start_s=15.0),
                 ticks=30)
    named = [[(d.root, d.fault_type) for d in s.diagnoses] for s in steps[16:]]
    assert named == [[(link, "link_flap")]] * len(named)
    assert "agg-0-0" in steps[-1].diagnoses[0].missing


def test_a_blind_switch_whose_links_are_all_up_names_nothing() -> None:
    steps = _run("agg-0-0", None)
    assert [s.rule for s in steps[-1].symptoms] == [STOPPED]
    assert not [d for s in steps for d in s.diagnoses]


def test_a_switch_that_goes_down_is_still_switch_down_not_its_links() -> None:
    """Every neighbour sees it down: its links are down because it is."""
    late = run_engine(FaultSpec(type=FaultType.SWITCH_DOWN, entity="agg-0-0",
                                start_s=15.0), 24)[1][-1]
    assert [(d.root, d.fault_type) for d in late.diagnoses] == [("agg-0-0", "switch_down")]


def _symptoms(stopped: list[int], down: list[int], flaps: tuple[int, float] | None = None
              ) -> list[Symptom]:
    out = ([Symptom(c, STOPPED, "switch_down", 1.0, 9.0) for c in stopped]
           + [Symptom(c, "oper_down", "link_down", 1.0, 8.0) for c in down])
    if flaps is not None:
        out.append(Symptom(flaps[0], "carrier_transitions", "link_flap", flaps[1], 7.0))
    return out


def test_only_links_whose_silent_end_its_neighbours_see_up_are_picked() -> None:
    # links 0-2; switch candidates 3 (forwards: 1 of 4 neighbours see it down) and
    # 4 (down: 3 of 4 do); link 0 is on 3, link 1 on 4, link 2 on neither (5, 6)
    ends = np.array([[3, 5, -1, -1], [4, 6, -1, -1], [5, 6, -1, -1]])
    x = np.zeros((7, len(FEATURES)))
    x[3, NBR_DOWN], x[4, NBR_DOWN] = 0.25, 0.75
    links, types = blind_links(_symptoms([3, 4], [0, 1, 2]), x, ends)
    assert (links.tolist(), types.tolist()) == ([0], [LINK_DOWN])
    assert blind_links(_symptoms([], [0, 1, 2]), x, ends)[0].size == 0, "none silent"
    assert blind_links(_symptoms([3], []), x, ends)[0].size == 0, "no link down"
    x[3, NBR_DOWN] = 0.5
    assert blind_links(_symptoms([3], [0]), x, ends)[0].size == 0, "half see it down"


def test_a_link_that_changed_more_than_once_flaps_once_is_down() -> None:
    ends = np.array([[3, 5, -1, -1]])
    x = np.zeros((6, len(FEATURES)))
    assert blind_links(_symptoms([3], [0], (0, 1.8)), x, ends)[1].tolist() == [LINK_FLAP]
    assert blind_links(_symptoms([3], [], (0, 1.8)), x, ends)[1].tolist() == [LINK_FLAP]
    assert blind_links(_symptoms([3], [0], (0, 1.0)), x, ends)[1].tolist() == [LINK_DOWN]
    assert blind_links(_symptoms([3], [], (0, 1.0)), x, ends)[0].size == 0, "up again"


def test_a_higher_score_the_model_gave_keeps_its_type() -> None:
    ends = np.array([[3, 5, -1, -1], [3, 6, -1, -1]])
    x = np.zeros((7, len(FEATURES)))
    root, best = np.array([0.95, 0.1, 0, 0, 0, 0, 0]), np.zeros(7, np.int64)
    best[0] = 7
    name_blind_links(_symptoms([3], [0, 1]), x, ends, root, best, 0.9)
    assert (root[0], best[0]) == (0.95, 7)
    assert (root[1], best[1]) == (0.9, LINK_DOWN)


CYCLE = {"agg-0-0:eth1~leaf-0-0:eth3", "agg-0-1:eth1~leaf-0-0:eth4",
         "agg-0-1:eth2~leaf-0-1:eth4", "agg-0-0:eth2~leaf-0-1:eth3"}
"""The four links of the buffer cycle a deadlock on the first of them makes in pod 0."""


@pytest.mark.parametrize("blind", ["agg-0-0", "leaf-0-0"])
def test_a_deadlock_through_a_blind_switch_still_closes_its_cycle(blind: str) -> None:
    """The blind switch's channels are paused by their receivers' account (the pause
    frames they send), so the cycle closes: a link of it is named every step. Taking
    paused channels only from their senders' account named nothing here."""
    first = "agg-0-0:eth1~leaf-0-0:eth3"
    steps = _run(blind, FaultSpec(type=FaultType.PFC_DEADLOCK, entity=first, start_s=15.0),
                 ticks=26)
    for step in steps[16:]:
        named = [(d.root, d.fault_type) for d in step.diagnoses]
        assert named, "a link of the cycle is named"
        assert {root for root, _ in named} <= CYCLE
        assert {fault for _, fault in named} == {"pfc_deadlock"}
        assert all(blind in d.missing for d in step.diagnoses)
