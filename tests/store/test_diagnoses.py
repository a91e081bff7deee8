"""Diagnoses in the store, on SQLite and on a real PostgreSQL (``db_url`` / ``store``)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import inspect, text

from fabricops.core.records import Diagnosis, Evidence, RankedEntity
from fabricops.store import Store, StoreConfig
from fabricops.store.database import build_engine, parse_url
from fabricops.store.schema import current_revisions, downgrade, head_revisions, upgrade
from tests.store.samples import T0, S

LINK = "leaf-0:eth1--spine-1:eth3"
INCIDENTS = (("inc-a", LINK), ("inc-B", "spine-1"), ("inc_ü", LINK))


def diagnosis(incident: str, t_s: int, root: str = LINK, fault_type: str = "gray_loss",
              confidence: float = 0.8) -> Diagnosis:
    """Revision of ``incident`` made at T0 + ``t_s`` seconds, with ranked and evidence."""
    return Diagnosis(
        id=incident, ts_ns=T0 + t_s * S, onset_ns=T0, root=root, root_kind="link",
        fault_type=fault_type, confidence=confidence,
        ranked=(RankedEntity(entity=root, kind="link", probability=confidence,
                             fault_type=fault_type),
                RankedEntity(entity="leaf-0", kind="switch", probability=0.1,
                             fault_type="switch_down")),
        evidence=(Evidence(entity=root, signal="fcs_error_ratio", value=3e-5, baseline=1e-9,
                           note="errors on one direction"),
                  Evidence(entity="leaf-0", signal="pause_share", value=0.0)),
        missing=("spine-1:gnmi",), affected_hosts=("host-3", "host-7"),
        affected_jobs=("job-42",), action="drain the link and replace the optic",
        model_version="rca/1")


def revisions() -> list[Diagnosis]:
    """Three incidents, revised every 10 s; their revisions interleave in time."""
    return [diagnosis(incident, 10 * k + i, root=root, confidence=0.5 + 0.1 * k)
            for i, (incident, root) in enumerate(INCIDENTS) for k in range(4)]


def by_time(records: Sequence[Diagnosis]) -> list[Diagnosis]:
    return sorted(records, key=lambda d: (d.ts_ns, d.id.encode()))


def test_a_diagnosis_reads_back_whole(store: Store) -> None:
    original = diagnosis("inc-a", 5, confidence=1.0)
    assert store.put_diagnoses([original]) == 1
    assert store.diagnoses(t0_ns=0, t1_ns=2**62) == [original]
    bare = Diagnosis(id="inc-b", ts_ns=0, onset_ns=0, root="host-1", root_kind="host",
                     fault_type="slow_receiver", confidence=0.0)
    store.put_diagnoses([bare])
    assert store.diagnoses(t0_ns=0, t1_ns=2**62) == [bare, original]


def test_diagnoses_are_stored_once(store: Store) -> None:
    records = revisions()
    assert store.put_diagnoses(records) == len(records)
    assert store.put_diagnoses(records) == 0
    changed = diagnosis("inc-a", 0, confidence=0.1)
    assert store.put_diagnoses([changed, diagnosis("inc-a", 1000)]) == 1, \
        "a revision already stored (same id, same ts_ns) is left as it is"
    got = store.diagnoses(t0_ns=0, t1_ns=2**62)
    assert got == by_time([*records, diagnosis("inc-a", 1000)])
    value = store.registry.get_sample_value
    assert value("fabricops_store_rows_written_total", {"table": "diagnoses"}) == 13
    assert value("fabricops_store_duplicates_ignored_total", {"table": "diagnoses"}) == 13


@pytest.mark.parametrize(("t0_s", "t1_s", "root", "incident", "limit"), [
    (0, 10_000, None, None, None),
    (10, 20, None, None, None),
    (11, 11, None, None, None),
    (0, 10_000, "spine-1", None, None),
    (0, 10_000, LINK, None, None),
    (0, 10_000, None, "inc_ü", None),
    (0, 10_000, None, "inc-b", None),
    (0, 25, LINK, "inc-a", None),
    (0, 10_000, None, None, 5),
    (100, 200, None, None, None),
])
def test_diagnoses_are_filtered_and_ordered_by_time(
        store: Store, t0_s: int, t1_s: int, root: str | None, incident: str | None,
        limit: int | None) -> None:
    records = revisions()
    store.put_diagnoses(records[::-1])
    t0, t1 = T0 + t0_s * S, T0 + t1_s * S
    expected = by_time([d for d in records if t0 <= d.ts_ns <= t1
                        and root in (None, d.root) and incident in (None, d.id)])
    assert store.diagnoses(t0_ns=t0, t1_ns=t1, root=root, diagnosis_id=incident,
                           limit=limit) == expected[:limit]


def test_latest_diagnoses_are_the_newest_revision_of_each_incident(store: Store) -> None:
    records = revisions()
    store.put_diagnoses(records)
    newest = {d.id: d for d in by_time(records)}
    assert store.latest_diagnoses() == [newest["inc_ü"], newest["inc-B"], newest["inc-a"]]
    assert store.latest_diagnoses(limit=2) == [newest["inc_ü"], newest["inc-B"]]
    revised = diagnosis("inc-a", 100, fault_type="optic_degradation")
    store.put_diagnoses([revised])
    assert store.latest_diagnoses(limit=1) == [revised]
    assert store.latest_diagnoses(limit=0) == []


def test_incidents_revised_at_the_same_time_are_ordered_by_id(store: Store) -> None:
    same = [diagnosis(incident, 7) for incident in ("b", "B", "a", "ü", "A")]
    store.put_diagnoses(same)
    assert [d.id for d in store.latest_diagnoses(limit=3)] == ["A", "B", "a"]
    assert [d.id for d in store.diagnoses(t0_ns=0, t1_ns=2**62)] == ["A", "B", "a", "b", "ü"]


def test_prune_deletes_old_revisions(db_url: str) -> None:
    store = Store(StoreConfig(url=db_url, retention_s=15))
    store.start()
    try:
        records = revisions()
        store.put_diagnoses(records)
        assert store.prune(now_ns=T0 + 35 * S) == 6
        assert store.diagnoses(t0_ns=0, t1_ns=2**62) == by_time(
            [d for d in records if d.ts_ns >= T0 + 20 * S])
        assert store.latest_diagnoses() == store.diagnoses(t0_ns=T0 + 30 * S,
                                                           t1_ns=2**62)[::-1]
    finally:
        store.stop()


def test_a_body_that_no_longer_decodes_is_skipped_and_counted(store: Store) -> None:
    store.put_diagnoses(revisions()[:2])
    engine = build_engine(parse_url(store.config.url), timeout_s=5)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE diagnoses SET body = :body WHERE ts_ns = :ts_ns"),
                         {"body": b'{"id": "inc-a"}', "ts_ns": T0})
    finally:
        engine.dispose()
    assert store.diagnoses(t0_ns=0, t1_ns=2**62) == [revisions()[1]]
    assert store.registry.get_sample_value("fabricops_store_errors_total",
                                           {"op": "diagnoses_decode"}) == 1


def test_a_0002_database_with_rows_upgrades_and_downgrades(db_url: str) -> None:
    engine = build_engine(parse_url(db_url), timeout_s=5)
    try:
        upgrade(engine, "0002")
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO stream_states (device, source, ts_ns, state) "
                              "VALUES ('leaf-0', 'gnmi', 5, :state)"), {"state": b"\x00\x01"})
        store = Store(StoreConfig(url=db_url))
        store.start()
        try:
            assert store.stream_states() == {("leaf-0", "gnmi"): b"\x00\x01"}
            assert store.put_diagnoses(revisions()) == 12
            assert len(store.latest_diagnoses()) == 3
        finally:
            store.stop()
        with engine.connect() as conn:
            assert current_revisions(conn) == head_revisions()
        downgrade(engine, "0002")
        assert "diagnoses" not in inspect(engine).get_table_names()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM stream_states")).scalar_one() == 1
    finally:
        engine.dispose()
