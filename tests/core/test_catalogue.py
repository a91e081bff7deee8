"""The metric catalogue: every designed metric, kinds, stable ids, lookups."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fabricops.core.catalogue import (
    CATALOGUE,
    FAMILIES,
    PRIORITIES,
    Catalogue,
    MetricFamily,
    MetricKind,
    Scope,
    UnknownMetricError,
)

C, G, S = MetricKind.COUNTER, MetricKind.GAUGE, MetricKind.STATE

DESIGN: dict[str, tuple[MetricKind, Scope]] = {
    "in_octets": (C, Scope.PORT),
    "out_octets": (C, Scope.PORT),
    "in_pkts": (C, Scope.PORT),
    "out_pkts": (C, Scope.PORT),
    "in_errors": (C, Scope.PORT),
    "in_fcs_errors": (C, Scope.PORT),
    "in_discards": (C, Scope.PORT),
    "out_discards": (C, Scope.PORT),
    "oper_status": (S, Scope.PORT),
    "carrier_transitions": (C, Scope.PORT),
    "pfc_rx_pause": (C, Scope.PORT),
    "pfc_tx_pause": (C, Scope.PORT),
    "ecn_marked_pkts": (C, Scope.PORT),
    "queue_depth_bytes": (G, Scope.PORT),
    "queue_watermark_bytes": (G, Scope.PORT),
    "rx_power_dbm": (G, Scope.PORT),
    "tx_power_dbm": (G, Scope.PORT),
    "temperature_c": (G, Scope.PORT),
    "tx_bias_ma": (G, Scope.PORT),
    "supply_voltage_v": (G, Scope.PORT),
    "fan_speed_rpm": (G, Scope.SWITCH),
    "chassis_temperature_c": (G, Scope.SWITCH),
    "psu_power_w": (G, Scope.SWITCH),
    "cnp_sent": (C, Scope.NIC),
    "cnp_handled": (C, Scope.NIC),
    "rdma_retransmits": (C, Scope.NIC),
    "out_of_sequence": (C, Scope.NIC),
    "rdma_tx_rate_bps": (G, Scope.NIC),
    "hop_latency_ns": (G, Scope.INT_HOP),
    "queue_occupancy": (G, Scope.INT_HOP),
    "egress_tx_util": (G, Scope.INT_HOP),
}

# Ids are on the wire: changing any of these breaks stored frames.
STABLE_IDS = {
    "in_octets": 1,
    "out_octets": 2,
    "in_pkts": 3,
    "oper_status": 9,
    "ecn_marked_pkts": 11,
    "queue_depth_bytes": 12,
    "pfc_rx_pause{prio=0}": 16,
    "pfc_rx_pause{prio=3}": 19,
    "pfc_rx_pause{prio=7}": 23,
    "pfc_tx_pause{prio=0}": 24,
    "pfc_tx_pause{prio=3}": 27,
    "rx_power_dbm": 32,
    "temperature_c": 34,
    "cnp_sent": 40,
    "rdma_tx_rate_bps": 44,
    "hop_latency_ns": 50,
    "egress_tx_util": 52,
}


@pytest.mark.parametrize(("name", "expected"), sorted(DESIGN.items()))
def test_design_metric_present_with_kind_and_scope(
    name: str, expected: tuple[MetricKind, Scope]
) -> None:
    family = CATALOGUE.families[name]
    assert (family.kind, family.scope) == expected


def test_no_metric_beyond_the_design() -> None:
    assert set(CATALOGUE.families) == set(DESIGN)


@pytest.mark.parametrize(("name", "metric_id"), sorted(STABLE_IDS.items()))
def test_ids_are_stable(name: str, metric_id: int) -> None:
    assert CATALOGUE.id_of(name) == metric_id
    assert CATALOGUE.by_id(metric_id).name == name


def test_ids_and_names_unique() -> None:
    ids = [m.id for m in CATALOGUE.metrics]
    names = [m.name for m in CATALOGUE.metrics]
    assert len(set(ids)) == len(ids) == len(CATALOGUE)
    assert len(set(names)) == len(names)
    assert all(0 < i <= 0xFFFF for i in ids)  # frames carry ids as u16


def test_labelled_families_expand_per_priority() -> None:
    for fam in ("pfc_rx_pause", "pfc_tx_pause"):
        for prio in PRIORITIES:
            metric = CATALOGUE.by_name(f"{fam}{{prio={prio}}}")
            assert metric.label_value == prio
            assert metric.family.name == fam
            assert metric.kind is C
        with pytest.raises(UnknownMetricError):
            CATALOGUE.by_name(fam)
    assert len(PRIORITIES) == 8


def test_unknown_names_and_ids_raise_naming_them() -> None:
    with pytest.raises(UnknownMetricError, match="'in_bananas'"):
        CATALOGUE.by_name("in_bananas")
    with pytest.raises(UnknownMetricError, match=re.escape("'pfc_rx_pause{prio=8}'")):
        CATALOGUE.id_of("pfc_rx_pause{prio=8}")
    with pytest.raises(UnknownMetricError, match="14"):
        CATALOGUE.by_id(14)


def test_lookup_tables_agree_with_metrics() -> None:
    assert CATALOGUE.max_id == max(m.id for m in CATALOGUE.metrics)
    known = np.flatnonzero(CATALOGUE.is_known).tolist()
    assert known == sorted(m.id for m in CATALOGUE.metrics)
    floats = set(np.flatnonzero(CATALOGUE.is_float).tolist())
    assert floats == {m.id for m in CATALOGUE.metrics if m.kind is G}


def test_of_scope() -> None:
    nic = {m.name for m in CATALOGUE.of_scope(Scope.NIC)}
    assert nic == {"cnp_sent", "cnp_handled", "rdma_retransmits", "out_of_sequence",
                   "rdma_tx_rate_bps"}
    assert len(CATALOGUE.of_scope(Scope.PORT)) == 18 + 2 * len(PRIORITIES)


def test_overlapping_ids_are_refused() -> None:
    clash = MetricFamily("clash", C, "x", Scope.PORT, FAMILIES[0].first_id, "clashes")
    with pytest.raises(ValueError, match="overlap"):
        Catalogue((*FAMILIES, clash))


def test_every_family_has_a_source_and_description() -> None:
    for fam in FAMILIES:
        src = fam.sources
        assert src.snmp_oid or src.openconfig_path or src.int_field, fam.name
        assert fam.description, fam.name
        assert fam.unit, fam.name
