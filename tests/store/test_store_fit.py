"""``store_problem``: what the store's columns cannot keep is named before any SQL runs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fabricops.core.frame import Frame, Source
from fabricops.core.intreport import MAX_TS_NS, IntBatch
from fabricops.pipeline.int_paths import IntPathBook
from fabricops.store import Store, StoreError
from fabricops.store.records import StoredRecord, fits_store, store_problem
from tests.collectors.int_samples import COMMON_BITS, random_batch
from tests.store import samples


def test_the_sample_records_fit() -> None:
    records: list[StoredRecord] = [*samples.series(), *samples.segments(), *samples.events(),
                                   *samples.int_paths(), samples.frame("leaf-0", 3)]
    assert [r for r in records if not fits_store(r)] == []


@pytest.mark.parametrize(("record", "named"), [
    (dataclasses.replace(samples.int_path(samples.PATH_A, 0, 1), last_ts_ns=2**63),
     "IntPathRecord.last_ts_ns 9223372036854775808 is outside [0, 9223372036854775807]"),
    (dataclasses.replace(samples.int_path(samples.PATH_A, 0, 1), first_ts_ns=-1),
     "IntPathRecord.first_ts_ns -1"),
    (dataclasses.replace(samples.int_path(samples.PATH_A, 0, 1), sport=2**31),
     "IntPathRecord.sport"),
    (dataclasses.replace(samples.int_path(samples.PATH_A, 0, 1), sink="s" * 256),
     "IntPathRecord.sink 'ssss"),
    (dataclasses.replace(samples.segment("leaf-0", 0), last_seq=2**63),
     "SegmentRecord.last_seq"),
    (dataclasses.replace(samples.segment("leaf-0", 0), max_error=float("nan")),
     "SegmentRecord.max_error nan is not finite"),
    (samples.events()[0].model_copy(update={"entity": "leaf-0:\x00"}),
     "Event.entity 'leaf-0:\\x00' holds a NUL character"),
    (samples.events()[0].model_copy(update={"ts_ns": 2**63}), "Event.ts_ns"),
    (dataclasses.replace(samples.frame("leaf-0", 1), seq=2**63), "Frame.seq"),
    (dataclasses.replace(samples.frame("leaf-0", 1), device="d" * 300),
     "Frame.device 'dddd"),
    (Frame("leaf-0", 1, Source.GNMI, 1, ("e" * 256,), np.zeros(1, np.uint32),
           np.ones(1, np.uint16), np.ones(1, np.uint64)),
     "frame of device 'leaf-0': entity #0 'eeee"),
])
def test_a_value_a_column_cannot_keep_is_named(record: StoredRecord, named: str) -> None:
    problem = store_problem(record)
    assert problem is not None
    assert named in problem
    assert not fits_store(record)


def test_the_check_agrees_with_the_database(store: Store) -> None:
    good = samples.int_path(samples.PATH_A, 0, 1)
    too_late = dataclasses.replace(good, last_ts_ns=2**63)
    assert store_problem(too_late) is not None
    with pytest.raises(StoreError, match="put_int_paths"):
        store.put_int_paths([good, too_late])
    assert store.put_int_paths([r for r in (good, too_late) if fits_store(r)]) == 1


def test_every_path_record_of_an_int_batch_fits() -> None:
    rng = np.random.default_rng(4)
    batch = random_batch(rng, 50, rng.integers(1, 5, 50).tolist(), COMMON_BITS,
                         ts_ns=np.r_[np.full(5, MAX_TS_NS), rng.integers(0, MAX_TS_NS, 45)])
    records = IntPathBook(None).records(IntBatch.decode(batch.encode()))
    assert records
    assert [store_problem(r) for r in records] == [None] * len(records)
