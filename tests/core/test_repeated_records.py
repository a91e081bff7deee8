"""A device's records repeat their layout: ``EntityTables`` reads a record that
repeats the device's last one without parsing its table, and must give exactly
what a full decode gives, or refuse exactly what a full decode refuses."""

from __future__ import annotations

import numpy as np

from fabricops.core.frame import Frame, FrameDecodeError, Source
from fabricops.core.wire_columns import varint
from fabricops.core.wire_frame import EntityTables

T = 1_700_000_000_123_456_789
ENTITIES = [f"leaf-0-3:eth{i}" for i in range(1, 9)]


def frame(t: int, seq: int, values: list[float] | None = None,
          entities: list[str] = ENTITIES) -> Frame:
    metrics = ["in_octets", "temperature_c", "oper_status"]
    ents = [e for e in entities for _ in metrics]
    vals = values or [t * 1000 + i if i % 3 == 0 else (40.5 if i % 3 == 1 else 1)
                      for i in range(len(ents))]
    return Frame.build("leaf-0-3", T + t * 10**9, Source.GNMI, seq, ents,
                       metrics * len(entities), vals)


def decoded(data: bytes, tables: EntityTables | None) -> Frame | str:
    try:
        return Frame.decode(data, tables)
    except FrameDecodeError as exc:
        return f"refused: {exc}"


def test_repeated_records_decode_as_a_full_decode_does_and_share_the_layout() -> None:
    tables = EntityTables()
    frames = [frame(t, seq=t + 1) for t in range(4)]
    got = [Frame.decode(f.encode(), tables) for f in frames]
    assert got == frames
    assert got[3].entities is got[1].entities
    assert got[3].metric is got[2].metric  # read once, on the second record
    assert got[3].entity_idx is got[2].entity_idx
    assert not got[3].raw.flags.writeable
    assert got[3].raw.tolist() == frames[3].raw.tolist()


def test_a_record_that_changes_its_table_or_size_is_read_in_full() -> None:
    tables = EntityTables()
    for t in range(3):
        Frame.decode(frame(t, t).encode(), tables)
    renamed = frame(3, 3, entities=[e.replace("eth", "swp") for e in ENTITIES])
    assert Frame.decode(renamed.encode(), tables) == renamed
    fewer = frame(4, 4, entities=ENTITIES[:5])
    assert Frame.decode(fewer.encode(), tables) == fewer
    back = frame(5, 5)
    assert Frame.decode(back.encode(), tables) == back


def test_a_repeated_record_is_still_checked_where_it_may_differ() -> None:
    tables = EntityTables()
    for t in range(3):
        Frame.decode(frame(t, t).encode(), tables)
    data = frame(3, 3).encode()
    assert data[0] == 0x08  # n_samples first, as encode writes it
    more = b"\x08" + varint(25) + data[1 + len(varint(24)):]
    negative = data.replace(varint(T + 3 * 10**9), varint(2**64 - 5), 1)
    cases = {"cut": (data[:-8], "runs past the end"),
             "longer": (data + b"\x49" + b"\x00" * 8, "n_samples is 24 but the columns"),
             "count": (more, "n_samples is 25"),
             "time": (negative, "before the Unix epoch")}
    for name, (bad, why) in cases.items():
        got = decoded(bad, tables)
        assert isinstance(got, str), name
        assert why in got, name
        assert got == decoded(bad, None), name


def test_any_damage_to_a_repeated_record_decodes_as_a_full_decode_does() -> None:
    """Flip, cut and insert bytes all over a record that repeats a remembered one."""
    rng = np.random.default_rng(11)
    base = frame(3, 3).encode()
    for _ in range(600):
        data = bytearray(base)
        how = rng.integers(3)
        at = int(rng.integers(len(data)))
        if how == 0:
            data[at] ^= 1 << int(rng.integers(8))
        elif how == 1:
            del data[at:at + int(rng.integers(1, 9))]
        else:
            data[at:at] = bytes(rng.integers(0, 256, int(rng.integers(1, 4)), np.uint8))
        tables = EntityTables()
        for t in range(3):
            Frame.decode(frame(t, t).encode(), tables)
        assert decoded(bytes(data), tables) == decoded(bytes(data), None), bytes(data)


def test_a_record_with_fields_after_its_values_is_never_read_as_a_repeat() -> None:
    """Values must end the record for the shortcut: a field after them keeps the full
    decode (which takes the last value of a repeated scalar, as protobuf does)."""
    tables = EntityTables()
    late_seq = b"\x28" + varint(77)  # field 5 (seq), after the values
    for t in range(3):
        Frame.decode(frame(t, t).encode() + late_seq, tables)
    assert Frame.decode(frame(3, 3).encode() + late_seq, tables).seq == 77


def test_a_record_ending_in_an_unknown_field_keeps_its_values() -> None:
    """The last bytes are the unknown field, not values: never read as a repeat, even
    where the bytes before them repeat (the first values do not change)."""
    tables = EntityTables()
    unknown = b"\x78\x07"  # field 15, a varint the schema does not have

    def steady_first(t: int) -> Frame:
        return frame(t, t, [5.0, 40.5, 1.0] + [float(t * 100 + i) for i in range(21)])

    for t in range(3):
        Frame.decode(steady_first(t).encode() + unknown, tables)
    later = steady_first(3)
    assert Frame.decode(later.encode() + unknown, tables) == later
