"""Probe flows are validated plain tuples, usable wherever (src, dst, sport) is."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from fabricops.core.probes import ProbeFlow


def test_a_probe_flow_is_a_tuple_of_its_three_fields() -> None:
    flow = ProbeFlow("host-000:nic0", "host-007:nic0", 50000)
    assert flow == ("host-000:nic0", "host-007:nic0", 50000)
    src, dst, sport = flow
    assert (src, dst, sport) == (flow.src, flow.dst, flow.sport)
    assert str(flow) == "host-000:nic0 -> host-007:nic0 sport 50000"


@pytest.mark.parametrize(("src", "dst", "sport", "message"), [
    ("a:nic0", "b:nic0", 0, "source port 0 is not 1..65535"),
    ("a:nic0", "b:nic0", 65536, "source port 65536 is not 1..65535"),
    ("a:nic0", "b:nic0", "80", "source port '80' is not an int"),
    ("", "b:nic0", 80, "ends must be NIC ids"),
])
def test_bad_probe_flows_are_refused(src: str, dst: str, sport: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ProbeFlow(src, dst, sport)


def test_config_fields_validate_probe_flows_from_plain_tuples() -> None:
    class Config(BaseModel):
        probes: tuple[ProbeFlow, ...] = ()

    got = Config.model_validate({"probes": [["a:nic0", "b:nic0", 9]]})
    assert got.probes == (ProbeFlow("a:nic0", "b:nic0", 9),)
    assert isinstance(got.probes[0], ProbeFlow)
    with pytest.raises(ValidationError, match="less than or equal to 65535"):
        Config.model_validate({"probes": [["a:nic0", "b:nic0", 70000]]})
