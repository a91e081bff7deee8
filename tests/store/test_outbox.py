"""The webhook outbox in the store, on SQLite and on a real PostgreSQL (``db_url`` / ``store``)."""

from __future__ import annotations

import threading

from fabricops.store import Store, StoreConfig
from fabricops.store.outbox import OutboxEntry, OutboxRow, OutboxState
from tests.store.samples import T0, S

LEASE_S = 60.0


def entry(receiver: str, key: str) -> OutboxEntry:
    return OutboxEntry(receiver, key, "alert.diagnosis", f'{{"id":"{key}","note":"caf\u00e9"}}')


def keys(rows: list[OutboxRow]) -> list[str]:
    return [r.event_key for r in rows]


def claim(store: Store, receiver: str, now_ns: int = T0, limit: int = 20) -> list[OutboxRow]:
    return store.due_alerts(receiver, now_ns=now_ns, lease_s=LEASE_S, limit=limit)


def test_an_alert_is_enqueued_once_per_receiver_and_record(store: Store) -> None:
    batch = [entry("ops", "d1"), entry("ops", "d2"), entry("noc", "d1")]
    assert store.enqueue_alerts(batch, now_ns=T0) == 3
    assert store.enqueue_alerts([*batch, entry("ops", "d3")], now_ns=T0 + S) == 1
    assert store.pending_alerts() == {"ops": 3, "noc": 1}
    (row,) = store.alerts(receiver="noc")
    assert (row.event_key, row.event, row.body) == ("d1", "alert.diagnosis",
                                                     '{"id":"d1","note":"caf\u00e9"}')
    assert (row.state, row.attempts, row.created_ns, row.next_attempt_ns, row.last_error,
            row.done_ns) == (OutboxState.PENDING, 0, T0, T0, "", None)


def test_due_rows_are_claimed_oldest_first_and_hidden_while_claimed(store: Store) -> None:
    store.enqueue_alerts([entry("ops", f"d{i}") for i in range(5)], now_ns=T0)
    first = claim(store, "ops", limit=3)
    assert keys(first) == ["d0", "d1", "d2"]
    assert claim(store, "ops", now_ns=T0 + S) == []
    assert store.mark_alert_delivered(first[0].id, now_ns=T0 + S)
    assert store.release_alerts([r.id for r in first[1:]], now_ns=T0 + S) == 2
    assert keys(claim(store, "ops", now_ns=T0 + S, limit=10)) == ["d1", "d2", "d3", "d4"]
    lease_ends = T0 + S + round(LEASE_S * S)
    assert claim(store, "ops", now_ns=lease_ends - 1) == []
    assert keys(claim(store, "ops", now_ns=lease_ends)) == ["d1", "d2", "d3", "d4"]


def test_a_row_waiting_for_its_retry_holds_back_its_receiver_only(store: Store) -> None:
    store.enqueue_alerts([entry("ops", "d1"), entry("ops", "d2"), entry("noc", "d1")],
                         now_ns=T0)
    head, behind = claim(store, "ops")
    assert store.retry_alert(head.id, next_attempt_ns=T0 + 10 * S,
                             error="webhook http://ops/: HTTP 503 Service Unavailable")
    store.release_alerts([behind.id], now_ns=T0)
    assert claim(store, "ops", now_ns=T0 + 9 * S) == []
    assert keys(claim(store, "noc", now_ns=T0 + 9 * S)) == ["d1"]
    again = claim(store, "ops", now_ns=T0 + 10 * S)
    assert keys(again) == ["d1", "d2"]
    assert (again[0].attempts, again[0].last_error) == (
        1, "webhook http://ops/: HTTP 503 Service Unavailable")


def test_delivered_and_dead_rows_leave_the_queue_with_their_outcome(store: Store) -> None:
    store.enqueue_alerts([entry("ops", "d1"), entry("ops", "d2"), entry("ops", "d3")],
                         now_ns=T0)
    a, b, _ = claim(store, "ops")
    assert store.mark_alert_delivered(a.id, now_ns=T0 + S)
    assert store.mark_alert_dead(b.id, now_ns=T0 + 2 * S, error="HTTP 400 Bad Request")
    assert not store.mark_alert_delivered(a.id, now_ns=T0 + 3 * S)
    assert not store.retry_alert(b.id, next_attempt_ns=T0, error="late")
    assert store.pending_alerts() == {"ops": 1}
    (dead,) = store.alerts(state=OutboxState.DEAD)
    assert (dead.event_key, dead.attempts, dead.done_ns, dead.last_error) == (
        "d2", 1, T0 + 2 * S, "HTTP 400 Bad Request")
    (delivered,) = store.alerts(state=OutboxState.DELIVERED)
    assert (delivered.event_key, delivered.attempts, delivered.done_ns) == ("d1", 1, T0 + S)


def test_prune_deletes_delivered_rows_older_than_the_cutoff_only(store: Store) -> None:
    store.enqueue_alerts([entry("ops", f"d{i}") for i in range(4)], now_ns=T0)
    rows = claim(store, "ops")
    store.mark_alert_delivered(rows[0].id, now_ns=T0 + S)
    store.mark_alert_delivered(rows[1].id, now_ns=T0 + 5 * S)
    store.mark_alert_dead(rows[2].id, now_ns=T0 + S, error="refused")
    assert store.prune_alerts(before_ns=T0 + 5 * S) == 1
    assert keys(store.alerts()) == ["d1", "d2", "d3"]
    assert store.enqueue_alerts([entry("ops", "d0")], now_ns=T0 + 6 * S) == 1


def test_two_senders_on_one_database_never_claim_a_row_twice(db_url: str) -> None:
    stores = [Store(StoreConfig(url=db_url)) for _ in range(2)]
    for s in stores:
        s.start()
    stores[0].enqueue_alerts([entry("ops", f"d{i:03d}") for i in range(120)], now_ns=T0)
    claimed: list[list[str]] = [[], []]
    errors: list[BaseException] = []
    gate = threading.Barrier(2)

    def send(i: int) -> None:
        gate.wait()
        try:
            while stores[i].pending_alerts():
                for row in claim(stores[i], "ops", now_ns=T0 + S, limit=7):
                    claimed[i].append(row.event_key)
                    if not stores[i].mark_alert_delivered(row.id, now_ns=T0 + S):
                        raise AssertionError(f"{row.event_key} was no longer pending")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    finally:
        for s in stores:
            s.stop()
    assert errors == []
    assert sorted(claimed[0] + claimed[1]) == [f"d{i:03d}" for i in range(120)]
    for own in claimed:
        assert own == sorted(own)
