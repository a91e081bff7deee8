"""A sample frame, and hypothesis strategies for the frames a codec must carry."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from fabricops.core.catalogue import CATALOGUE
from fabricops.core.frame import Frame, Source

U64_MAX = 2**64 - 1
KNOWN_IDS = [m.id for m in CATALOGUE.metrics]
GAUGE_IDS = [m.id for m in CATALOGUE.metrics if CATALOGUE.is_float[m.id]]
COUNTER_IDS = [m.id for m in CATALOGUE.metrics if not CATALOGUE.is_float[m.id]]
NAN_BITS = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x7FF4DEADBEEF0001]


def sample_frame() -> Frame:
    return Frame.build(
        "leaf-0-3", 1_700_000_000_123_456_789, Source.GNMI, 42,
        ["leaf-0-3:eth1", "leaf-0-3:eth2", "leaf-0-3:eth1", "leaf-0-3:eth2"],
        ["in_octets", "queue_depth_bytes", "pfc_rx_pause{prio=3}", "oper_status"],
        [U64_MAX, -12.5, 7, 1],
    )


def float_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


# ---- strategies -------------------------------------------------------------

names = st.text(st.characters(codec="utf-8"), max_size=12)
metric_ids = st.one_of(st.sampled_from(KNOWN_IDS), st.sampled_from([0, 14, 99, 65535]))
raw_values = st.one_of(
    st.integers(0, U64_MAX),
    st.integers(U64_MAX - 16, U64_MAX),
    st.sampled_from(NAN_BITS),
    st.floats(allow_nan=True, allow_infinity=True).map(float_bits),
)


STORABLE_TS = st.integers(0, 2**63 - 1)
STORABLE_SEQ = st.integers(0, 2**63 - 1)


@st.composite
def frames(draw: st.DrawFn, ts: st.SearchStrategy[int] = STORABLE_TS,
           seq: st.SearchStrategy[int] = STORABLE_SEQ) -> Frame:
    """Frames ``decode`` accepts (by default): every value the store can keep."""
    entities = draw(st.lists(names, min_size=1, max_size=6, unique=True))
    n = draw(st.integers(0, 40))
    idx = draw(st.lists(st.integers(0, len(entities) - 1), min_size=n, max_size=n))
    mets = draw(st.lists(metric_ids, min_size=n, max_size=n))
    raw = draw(st.lists(raw_values, min_size=n, max_size=n))
    return Frame(
        device=draw(names), ts_ns=draw(ts),
        source=draw(st.sampled_from(list(Source))), seq=draw(seq),
        entities=tuple(entities), entity_idx=np.array(idx, dtype=np.uint32),
        metric=np.array(mets, dtype=np.uint16), raw=np.array(raw, dtype=np.uint64),
    )
