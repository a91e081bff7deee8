"""Wire codecs of the bus's high-volume records: CPU per sample (frames) and per hop (INT).

Three codecs of the same records, measured in the same run:

- ``legacy``: the private binary codecs of ``telemetry.v1`` and ``int.v1``
  (``FOF``: ``frame_codec.encode``/``decode``; ``FOI``: a copy of the codec
  ``IntBatch`` had, below);
- ``proto/numpy``: what the bus carries now, ``Frame.encode``/``decode`` and
  ``IntBatch.encode``/``decode``: protobuf records whose packed columns are
  written with ``tobytes`` and read with ``np.frombuffer``;
- ``proto/repeat``: ``Frame.decode`` with ``EntityTables`` of a record that
  repeats its device's last one (the same table, new values), as a consumer
  reads a device's frames after the first two;
- ``proto/runtime``: the same messages through the protobuf runtime's generic
  classes (built from the schema's descriptors), from and to the same NumPy
  columns, as a consumer with generated code would.

Records: one frame of a 64-port switch with every port metric of the catalogue
(2,176 samples), and one INT batch of 1,024 reports of 5 hops (a sink's
batch). Each figure is ``time.process_time`` of this process, the best of
``--rounds`` rounds of ``--reps`` records, divided by the samples (or hops)
in a record; decoding includes the checks done at the bus boundary. Sizes are
bytes per sample (hop) as encoded, then after LZ4 (the bus's default
compression).

    python bench/bench_wire.py [--reps N] [--rounds R]
"""

from __future__ import annotations

import argparse
import functools
import struct
import time
from collections.abc import Callable
from typing import Any

import lz4.frame
import numpy as np

from fabricops.core import frame_codec, wire_frame, wire_schema
from fabricops.core.catalogue import CATALOGUE, Scope
from fabricops.core.frame import Frame, Source
from fabricops.core.intreport import HOP_COLUMNS, INVALID, REPORT_COLUMNS, SCHEMA, IntBatch
from fabricops.core.wire_frame import EntityTables

_FOI_HEADER = struct.Struct("<3sBII")
_FOI_REPORT = [(n, dt) for n, dt in REPORT_COLUMNS if n != "hop_start"]


def foi_encode(batch: IntBatch) -> bytes:
    """The ``int.v1`` codec: magic, version, counts, then every column as raw arrays."""
    parts = [_FOI_HEADER.pack(b"FOI", 1, batch.n_reports, batch.n_hops)]
    parts += [getattr(batch, n).astype(f"<{dt}").tobytes() for n, dt in _FOI_REPORT]
    parts += [getattr(batch, n).astype(f"<{dt}").tobytes() for n, dt, _ in HOP_COLUMNS]
    return b"".join(parts)


def foi_decode(data: bytes) -> IntBatch:
    """Inverse of ``foi_encode`` with the checks the ``int.v1`` decoder made."""
    buf = memoryview(data).cast("B")
    magic, version, n_rep, n_hop = _FOI_HEADER.unpack_from(buf)
    if magic != b"FOI" or version != 1:
        raise ValueError("not an int.v1 batch")
    cols, pos = {}, _FOI_HEADER.size
    layout = [(n, dt, n_rep) for n, dt in _FOI_REPORT]
    for name, dt, count in layout + [(n, dt, n_hop) for n, dt, _ in HOP_COLUMNS]:
        cols[name] = np.frombuffer(buf, f"<{dt}", count, pos).astype(np.dtype(dt))
        pos += count * np.dtype(dt).itemsize
    if pos != len(buf) or int(cols["hop_count"].sum()) != n_hop:
        raise ValueError("int.v1 batch sizes do not add up")
    return IntBatch.from_columns(cols)


def switch_frame() -> Frame:
    """A 64-port switch: every port metric of the catalogue on every port."""
    metrics = CATALOGUE.of_scope(Scope.PORT)
    rng = np.random.default_rng(7)
    ents = [f"leaf-0-3:eth{p}" for p in range(64) for _ in metrics]
    ids = np.array([m.id for _ in range(64) for m in metrics], np.uint16)
    gauge = CATALOGUE.is_float[ids]
    values = np.where(gauge, rng.normal(40, 5, len(ids)), rng.integers(0, 2**40, len(ids)))
    vals = [float(v) if g else int(v) for v, g in zip(values.tolist(), gauge.tolist(),
                                                      strict=True)]
    return Frame.build("leaf-0-3", 1_700_000_000 * 10**9, Source.SNMP, 12345, ents, ids, vals)


def int_batch() -> IntBatch:
    rng = np.random.default_rng(3)
    n, hops = 1024, 5
    cols: dict[str, Any] = {
        "ts_ns": rng.integers(1, 2**62, n, dtype=np.int64), "sink": np.full(n, 7),
        "seq": np.arange(n), "src_ip": rng.integers(0, 2**32, n),
        "dst_ip": rng.integers(0, 2**32, n), "sport": rng.integers(0, 2**16, n),
        "dport": np.full(n, 4791), "proto": np.full(n, 17), "flags": np.full(n, 2),
        "instructions": np.full(n, 0xFD00), "hop_count": np.full(n, hops)}
    for name, _, bit in HOP_COLUMNS:
        top = min(INVALID[name], 2**62)
        cols[name] = rng.integers(0, top, n * hops, dtype=np.int64) if 0xFD00 & bit \
            else np.full(n * hops, INVALID[name])
    return IntBatch.from_columns(cols)


_FRAME_CLASS = wire_schema.message_class(wire_frame.SCHEMA)
_INT_CLASS = wire_schema.message_class(SCHEMA)
_SOURCE_CODES = wire_schema.enum_numbers(
    _FRAME_CLASS.DESCRIPTOR.fields_by_name["source"].enum_type, Source)
_SOURCES = {i: s for s, i in _SOURCE_CODES.items()}


def runtime_frame_encode(f: Frame) -> bytes:
    return bytes(_FRAME_CLASS(
        n_samples=f.n_samples, device=f.device, ts_ns=f.ts_ns, source=_SOURCE_CODES[f.source],
        seq=f.seq, entities=f.entities, entity_idx=f.entity_idx.tolist(),
        metric=f.metric.tolist(), raw=f.raw.tolist()).SerializeToString())


def runtime_frame_decode(data: bytes) -> Frame:
    m = _FRAME_CLASS.FromString(data)
    return Frame(m.device, m.ts_ns, _SOURCES[m.source], m.seq, tuple(m.entities),
                 np.array(m.entity_idx, np.uint32), np.array(m.metric, np.uint16),
                 np.array(m.raw, np.uint64))


_INT_NAMES = [n for n, _ in _FOI_REPORT] + [n for n, _, _ in HOP_COLUMNS]


def runtime_int_encode(b: IntBatch) -> bytes:
    msg = _INT_CLASS(n_reports=b.n_reports, n_hops=b.n_hops,
                     **{n: getattr(b, n).tolist() for n in _INT_NAMES})
    return bytes(msg.SerializeToString())


def runtime_int_decode(data: bytes) -> IntBatch:
    m = _INT_CLASS.FromString(data)
    return IntBatch.from_columns({n: np.array(getattr(m, n), np.uint64) for n in _INT_NAMES})


def best_s(fn: Callable[[Any], Any], arg: Any, reps: int, rounds: int) -> float:
    """Best CPU seconds per call over ``rounds`` rounds of ``reps`` calls."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(reps):
            fn(arg)
        best = min(best, (time.process_time() - t0) / reps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    frame, batch = switch_frame(), int_batch()
    cases: list[tuple[str, str, Any, int, Callable[[Any], bytes], Callable[[bytes], Any]]] = [
        ("frame", "legacy FOF", frame, frame.n_samples, frame_codec.encode, frame_codec.decode),
        ("frame", "proto/numpy", frame, frame.n_samples, Frame.encode, Frame.decode),
        ("frame", "proto/repeat", frame, frame.n_samples, Frame.encode,
         functools.partial(Frame.decode, tables=EntityTables())),
        ("frame", "proto/runtime", frame, frame.n_samples, runtime_frame_encode,
         runtime_frame_decode),
        ("INT", "legacy FOI", batch, batch.n_hops, foi_encode, foi_decode),
        ("INT", "proto/numpy", batch, batch.n_hops, IntBatch.encode, IntBatch.decode),
        ("INT", "proto/runtime", batch, batch.n_hops, runtime_int_encode, runtime_int_decode),
    ]
    print(f"frame: {frame.n_samples} samples, {len(frame.entities)} entities; INT batch: "
          f"{batch.n_reports} reports, {batch.n_hops} hops")
    print(f"CPU time: best of {args.rounds} rounds of {args.reps} records")
    head = (f"{'record':<6} {'codec':<14} {'encode ns':>10} {'decode ns':>10} "
            f"{'vs legacy':>12} {'bytes':>7} {'lz4 B':>7}")
    print(head)
    print("-" * len(head))
    legacy: tuple[float, float] = (0.0, 0.0)
    for record, name, obj, unit, enc, dec in cases:
        data = enc(obj)
        if dec(data) != obj:
            raise SystemExit(f"{record} {name}: the round trip changed the record")
        e = best_s(enc, obj, args.reps, args.rounds) / unit * 1e9
        d = best_s(dec, data, args.reps, args.rounds) / unit * 1e9
        if name.startswith("legacy"):
            legacy = (e, d)
        ratio = f"{e / legacy[0]:.2f}/{d / legacy[1]:.2f}"
        packed = len(lz4.frame.compress(data)) / unit
        print(f"{record:<6} {name:<14} {e:>10.2f} {d:>10.2f} {ratio:>12} "
              f"{len(data) / unit:>7.2f} {packed:>7.2f}")
    print("ns of CPU per sample (frame) or hop (INT); 'vs legacy': encode/decode time")
    print("ratio to the legacy codec; bytes per sample or hop, as encoded and after LZ4")


if __name__ == "__main__":
    main()
