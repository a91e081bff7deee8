"""The discovered cabling against the intended one, line by line and as events."""

from __future__ import annotations

from fabricops.core.records import EventKind, Severity
from fabricops.core.topology import Link, Topology
from fabricops.discover.cabling_diff import DiffKind, diff_cabling, difference_events
from fabricops.simulator.builders import leaf_spine


def _fabric() -> Topology:
    return leaf_spine(gpus=16, nics_per_host=2, leaf_radix=8, spine_radix=8)


def _with_links(topo: Topology, links: list[tuple[str, str]]) -> Topology:
    return topo.model_copy(update={"links": tuple(Link(a=a, b=b) for a, b in links)})


def test_missing_miswired_and_unexpected_are_each_one_clear_line() -> None:
    built = _fabric()
    links = [(lk.a, lk.b) for lk in built.links]
    (a1, b1), (a2, b2) = links[0], links[1]
    intended = _with_links(built, links[:-1])  # the last link is not in the plan
    found = _with_links(built, [(a1, b2), (a2, b1), *links[3:]])  # link 2 is gone
    diffs = diff_cabling(intended, found)
    assert [(d.kind, d.entity) for d in diffs] == [
        (DiffKind.MISWIRED, built.links[0].id), (DiffKind.MISWIRED, built.links[1].id),
        (DiffKind.MISSING, built.links[2].id), (DiffKind.UNEXPECTED, built.links[-1].id)]
    assert diffs[0].text == (f"miswired   {a1} ~ {b1}: {a1} reaches {b2}, "
                             f"{b1} reaches {a2}")
    assert "neither end has a neighbour" in diffs[2].text
    events = difference_events(diffs, ts_ns=5)
    assert len(events) == len(diffs)
    assert {e.kind for e in events} == {EventKind.ANOMALY}
    assert events[0].severity is Severity.CRITICAL
    assert events[0].metric == "lldp_neighbor"
    assert events[0].entity == built.links[0].id
    assert events[0].detail == diffs[0].text


def test_the_same_cabling_has_no_difference() -> None:
    topo = _fabric()
    assert diff_cabling(topo, topo) == []


def test_a_link_to_a_port_left_uncabled_is_unexpected() -> None:
    topo = _fabric()
    links = [(lk.a, lk.b) for lk in topo.links]
    fewer = _with_links(topo, links[1:])
    diffs = diff_cabling(fewer, topo)
    assert [(d.kind, d.entity) for d in diffs] == [(DiffKind.UNEXPECTED, topo.links[0].id)]


def test_links_of_a_device_that_did_not_answer_are_unchecked_not_missing() -> None:
    built = _fabric()
    links = [(lk.a, lk.b) for lk in built.links]
    silent = links[2][0].partition(":")[0]
    gone = [lk for lk in links if silent not in (lk[0].partition(":")[0],
                                                 lk[1].partition(":")[0])]
    found = _with_links(built, gone)
    diffs = diff_cabling(built, found, frozenset({silent}))
    assert diffs
    assert {d.kind for d in diffs} == {DiffKind.UNCHECKED}
    assert all(d.text.endswith(f"{silent} did not answer") for d in diffs)
    assert {d.kind for d in diff_cabling(built, found)} == {DiffKind.MISSING}
