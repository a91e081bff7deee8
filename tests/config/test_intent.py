"""The fabric intent: defaults that make sense, and one-line errors for every broken rule."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from fabricops.config.intent import (
    EcmpPolicy,
    EcnProfile,
    FabricIntent,
    HashField,
    QosPolicy,
    WatchdogPolicy,
)

G400 = 400_000_000_000


def ecn(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"speed_bps": G400, "min_threshold_bytes": 600_000,
                           "max_threshold_bytes": 6_000_000, "mark_probability_pct": 10}
    doc.update(changes)
    return doc


def error_of(model: type[Any], doc: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(doc)
    message = str(info.value.errors()[0]["msg"])
    assert "\n" not in message
    return message


def test_defaults_are_a_valid_roce_policy() -> None:
    intent = FabricIntent(ecn_profiles=(EcnProfile(**ecn()),))
    assert intent.qos.lossless_priority == 3
    assert intent.qos.cnp_priority == 6
    assert intent.pfc.enabled
    assert intent.pfc.watchdog.enabled
    assert intent.mtu_bytes == 9100
    assert HashField.L4_SRC_PORT in intent.ecmp.hash_fields
    assert len(set(intent.ecmp.tier_seeds.values())) == len(intent.ecmp.tier_seeds)


def test_dscp_map_covers_all_64_codepoints() -> None:
    table = QosPolicy().dscp_to_tc
    assert len(table) == 64
    assert table[26] == 3
    assert table[48] == 6
    assert {tc for d, tc in table.items() if d not in (26, 48)} == {0}


def test_cnp_on_the_lossless_priority_needs_an_explicit_yes() -> None:
    message = error_of(QosPolicy, {"cnp_priority": 3})
    assert "cnp_priority 3 equals lossless_priority" in message
    assert "cnp_shares_lossless" in message
    assert QosPolicy(cnp_priority=3, cnp_shares_lossless=True).cnp_priority == 3


@pytest.mark.parametrize(("doc", "words"), [
    ({"cnp_dscp": 26}, "need distinct DSCPs"),
    ({"default_priority": 3}, "default_priority 3 is the lossless or the CNP class"),
    ({"lossless_priority": 8}, "less than or equal to 7"),
    ({"roce_dscp": 64}, "less than or equal to 63"),
    ({"trust": "cos"}, "'dscp' or 'pcp'"),
    ({"colour": "blue"}, "Extra inputs are not permitted"),
])
def test_qos_rules(doc: dict[str, Any], words: str) -> None:
    assert words in error_of(QosPolicy, doc)


def test_ecn_min_must_be_below_max() -> None:
    message = error_of(EcnProfile, ecn(min_threshold_bytes=6_000_000))
    assert message.startswith("Value error, ECN for 400G: min_threshold_bytes 6000000 must be")


def test_ecn_thresholds_must_fit_the_frame_and_the_buffer() -> None:
    low = error_of(FabricIntent, {"ecn_profiles": [ecn(min_threshold_bytes=4000)]})
    assert "below one 9100-byte frame" in low
    high = error_of(FabricIntent, {"ecn_profiles": [ecn(max_threshold_bytes=2**30)]})
    assert "exceeds the switch buffer" in high
    twice = error_of(FabricIntent, {"ecn_profiles": [ecn(), ecn()]})
    assert "two profiles for the same speed" in twice


def test_hash_seeds_must_differ_per_tier() -> None:
    message = error_of(EcmpPolicy, {"tier_seeds": {"leaf": 7, "spine": 7}})
    assert "leaf and spine both use 7" in message


def test_roce_entropy_field_is_required_in_the_hash() -> None:
    message = error_of(EcmpPolicy, {"hash_fields": ["src_ip", "dst_ip"]})
    assert "must include l4_src_port" in message


@pytest.mark.parametrize(("doc", "words"), [
    ({"detection_ms": 250}, "detection_ms 250 must be a multiple of poll_interval_ms 100"),
    ({"poll_interval_ms": 105}, "multiple of 10 ms"),
    ({"detection_ms": 50}, "greater than or equal to 100"),
    ({"restoration_ms": 70_000}, "less than or equal to 60000"),
])
def test_watchdog_rules(doc: dict[str, Any], words: str) -> None:
    assert words in error_of(WatchdogPolicy, doc)


def test_mtu_range_is_what_every_platform_takes() -> None:
    assert "less than or equal to 9214" in error_of(FabricIntent, {"mtu_bytes": 9216})
    assert "greater than or equal to 1500" in error_of(FabricIntent, {"mtu_bytes": 1000})


def test_intent_is_frozen_and_strict() -> None:
    intent = FabricIntent()
    with pytest.raises(ValidationError):
        intent.mtu_bytes = 4200  # type: ignore[misc]
    assert "Extra inputs" in error_of(FabricIntent, {"qos": {"lossles_priority": 3}})


def test_ecn_for_names_missing_speed() -> None:
    intent = FabricIntent(ecn_profiles=(EcnProfile(**ecn()),))
    assert intent.ecn_for(G400).min_threshold_bytes == 600_000
    with pytest.raises(ValueError, match=r"no ECN profile for 100G ports \(profiles: 400G\)"):
        intent.ecn_for(100_000_000_000)


def test_dcqcn_increase_steps_are_ordered() -> None:
    message = error_of(FabricIntent, {"dcqcn": {"rp": {"ai_rate_mbps": 80}}})
    assert "ai_rate_mbps 80 must not exceed hai_rate_mbps 50" in message
