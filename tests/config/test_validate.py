"""Judging validation traffic, and reading perftest / NCCL tests outputs from real hosts."""

from __future__ import annotations

import pytest

from fabricops.config.validate import (
    TrafficMeasurement,
    ValidationBounds,
    host_commands,
    judge,
    parse_ib_write_bw,
    parse_nccl,
)

IB_WRITE_BW = """
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 4            Transport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      4000000          392.14             391.87               0.747421
---------------------------------------------------------------------------------------
"""

NCCL = "\n".join((
    "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong",
    "     8388608       2097152     float     sum      -1    180.1   46.58   90.25      0"
    "    179.3   46.78   90.64      0",
    "  8589934592    2147483648     float     sum      -1  92811.0   92.55  179.32      0"
    "  92740.0   92.62  179.46      0",
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 134.8", ""))


def _m(**kw: object) -> TrafficMeasurement:
    base: dict[str, object] = {"pattern": "ring", "nics": 8, "seconds": 4.0,
                               "busbw_share": 0.9, "worst_nic_share": 0.8,
                               "worst_nic": "host-000:nic0", "drops": 0}
    return TrafficMeasurement.model_validate({**base, **kw})


def test_a_clean_run_passes_and_each_bound_fails_on_its_own() -> None:
    assert all(v.ok for v in judge(_m(), ValidationBounds()))
    for kw, criterion in (({"drops": 1}, "drops"), ({"pause_share_max": 0.2}, "pause time"),
                          ({"ecn_marked_share": 0.3}, "ECN marking"),
                          ({"busbw_share": 0.5}, "bus bandwidth")):
        failed = [v.criterion for v in judge(_m(**kw), ValidationBounds()) if not v.ok]
        assert failed == [criterion]


def test_measurements_out_of_range_are_refused() -> None:
    for bad in ({"drops": -1}, {"pause_share_max": 1.5}, {"nics": "x"}, {"colour": 1}):
        with pytest.raises(ValueError, match="validation error"):
            _m(**bad)


def test_ib_write_bw_average_of_the_largest_message() -> None:
    run = parse_ib_write_bw(IB_WRITE_BW)
    assert run.value == pytest.approx(391.87)
    assert run.unit == "Gb/s"
    mb = IB_WRITE_BW.replace("Gb/sec", "MB/sec").replace("391.87", "48000.00")
    assert parse_ib_write_bw(mb).value == pytest.approx(384.0)


def test_ib_write_bw_garbage_truncated_and_impossible_outputs() -> None:
    with pytest.raises(ValueError, match="no result row"):
        parse_ib_write_bw("Couldn't connect to host-001:18515\n")
    with pytest.raises(ValueError, match="no result row"):
        parse_ib_write_bw(IB_WRITE_BW[:IB_WRITE_BW.index(" 65536")])
    assert parse_ib_write_bw(IB_WRITE_BW + " 1024 xx yy\n").skipped_lines == 1
    with pytest.raises(ValueError, match="outside"):
        parse_ib_write_bw(IB_WRITE_BW.replace("391.87", "99999.0"))


def test_nccl_bus_bandwidth_from_the_average_or_the_largest_size() -> None:
    assert parse_nccl(NCCL).value == pytest.approx(134.8)
    no_avg = "\n".join(line for line in NCCL.splitlines() if "Avg" not in line)
    assert parse_nccl(no_avg).value == pytest.approx(179.32)


def test_nccl_garbage_truncated_and_impossible_outputs() -> None:
    with pytest.raises(ValueError, match="no result row"):
        parse_nccl("# nThread 1 nGpus 1\n")
    cut = NCCL[:NCCL.index("  8589934592")] + "  8589934592    21474"
    run = parse_nccl(cut.replace("# Avg", "#"))
    assert run.value == pytest.approx(90.25)
    assert run.skipped_lines == 1
    with pytest.raises(ValueError, match="outside"):
        parse_nccl(NCCL.replace("134.8", "-3"))


def test_host_commands_name_every_device_and_host() -> None:
    lines = host_commands(["h1", "h2", "h3"], rdma_devices=["mlx5_0", "mlx5_1"])
    assert len(lines) == 7
    assert all("mlx5_0 mlx5_1" in line for line in lines[:6])
    assert "--tclass=106" in lines[0]
    assert "-H h1:8,h2:8,h3:8" in lines[-1]
