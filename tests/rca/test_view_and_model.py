"""The RCA's view of the fabric (rates from frames) and its model file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fabricops.core.frame import Frame, Source
from fabricops.rca.features import FEATURES
from fabricops.rca.model import CLASSES, ModelError, RcaModel
from fabricops.rca.view import COL, FabricView, PortIndex
from fabricops.simulator.builders import fat_tree

T0 = 1_767_225_600_000_000_000


def frame(device: str, port: str, ts_s: float, octets: int, oper: int = 1) -> Frame:
    return Frame.build(device, T0 + int(ts_s * 1e9), Source.GNMI, 1, [port, port],
                       ["in_octets", "oper_status"], [octets, oper])


@pytest.fixture
def view() -> FabricView:
    return FabricView(PortIndex(fat_tree(k=4)), stale_s=3.5)


def test_rates_come_from_consecutive_samples_of_each_port(view: FabricView) -> None:
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 1000),
                 frame("leaf-0-0", "leaf-0-0:eth1", 2, 5000)])
    snap = view.snapshot()
    p = view.index.port_of["leaf-0-0:eth1"]
    assert snap.values[p, COL["in_octets"]] == pytest.approx(2000.0)
    assert snap.values[p, COL["oper_status"]] == 1.0


def test_a_reset_counter_leaves_the_rate_unknown_then_recovers(view: FabricView) -> None:
    p = view.index.port_of["leaf-0-0:eth1"]
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 10_000),
                 frame("leaf-0-0", "leaf-0-0:eth1", 1, 10)])
    assert np.isnan(view.snapshot().values[p, COL["in_octets"]])
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 2, 110)])
    assert view.snapshot().values[p, COL["in_octets"]] == pytest.approx(100.0)


def test_a_port_silent_past_stale_s_is_missing_not_zero(view: FabricView) -> None:
    p = view.index.port_of["leaf-0-0:eth1"]
    view.ingest([frame("leaf-0-0", "leaf-0-0:eth1", 0, 0), frame("leaf-0-0", "leaf-0-0:eth1",
                                                                1, 10)])
    later = view.snapshot(T0 + int(6e9))
    assert not later.port_fresh[p]
    assert np.isnan(later.values[p]).all()


def test_frames_of_unknown_devices_are_counted_not_fatal(view: FabricView) -> None:
    view.ingest([frame("leaf-9-9", "leaf-9-9:eth1", 0, 1)])
    assert view.samples_unknown == 2
    assert view.frames_seen == 0


def _tiny_model() -> RcaModel:
    rng = np.random.default_rng(0)
    x = rng.random((300, len(FEATURES)))
    y = (x[:, 3] > 0.5).astype(np.int64) * CLASSES.index("gray_loss")
    return RcaModel.fit(x, y, trained={"scenarios": 0})


def test_a_saved_model_loads_without_retraining_and_scores_the_same(tmp_path: Path) -> None:
    model = _tiny_model()
    path = model.save(tmp_path / "m.rcamodel")
    again = RcaModel.load(path)
    assert again.version == model.version
    x = np.random.default_rng(1).random((20, len(FEATURES)))
    kind = np.zeros(20, np.int8)
    np.testing.assert_array_equal(again.scores(x, kind)[0], model.scores(x, kind)[0])


def test_a_file_that_is_not_a_model_is_refused_with_its_name(tmp_path: Path) -> None:
    bad = tmp_path / "junk.rcamodel"
    bad.write_bytes(b"\x00\x00\x00\x02{}garbage")
    with pytest.raises(ModelError, match=r"junk\.rcamodel"):
        RcaModel.load(bad)
    with pytest.raises(ModelError, match="cannot read"):
        RcaModel.load(tmp_path / "absent.rcamodel")


def test_a_model_of_another_format_version_is_refused(tmp_path: Path) -> None:
    path = _tiny_model().save(tmp_path / "m.rcamodel")
    data = path.read_bytes()
    n = int.from_bytes(data[:4], "big")
    header = data[4:4 + n].replace(b'"format_version": 1', b'"format_version": 99')
    path.write_bytes(len(header).to_bytes(4, "big") + header + data[4 + n:])
    with pytest.raises(ModelError, match="format version 99"):
        RcaModel.load(path)
