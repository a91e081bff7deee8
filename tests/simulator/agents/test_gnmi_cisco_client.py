"""The simulated gNMI target through a second independent client, Cisco's cisco-gnmi, over
TLS with a login: Capabilities, Get of each data type, STREAM SAMPLE every 100 ms."""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabricops.simulator.agents.gnmi_selfsigned import self_signed_pair

from ...conftest import missing_peer
from .gnmi_twins import PASSWORD, USER, Live, live_twin, secured

pytestmark = pytest.mark.integration
PROBE = Path(__file__).with_name("cisco_gnmi_probe.py")
STATE = "/interfaces/interface/state"
OCTETS = "/interfaces/interface/state/counters/in-octets"


@pytest.fixture
def twin(tmp_path: Path) -> Iterator[tuple[Live, Path]]:
    if importlib.util.find_spec("cisco_gnmi") is None:
        missing_peer("cisco-gnmi is not installed (pip install -e '.[dev]'); it is the second "
                     "independent gNMI client the target is checked with")
    cert = self_signed_pair(tmp_path)
    # cisco-gnmi's proto predates double_val: decimal64 goes out as decimal_val for it
    for live in live_twin(secured(cert, decimal64="decimal_val"), tick_s=0.1, speed=1.0):
        yield live, cert[0]


def probe(live: Live, ca_file: Path) -> dict[str, Any]:
    env = {**os.environ, "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python",
           "PROBE_GNMI_PASSWORD": PASSWORD}
    done = subprocess.run([sys.executable, str(PROBE), live.target.address, str(ca_file), USER,
                           "leaf-0"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def values(note: dict[str, Any]) -> dict[str, Any]:
    return {path: value for path, (_, value) in note["updates"].items()}


def test_cisco_gnmi_gets_and_streams_the_twins_values(twin: tuple[Live, Path]) -> None:
    live, ca_file = twin
    seen = probe(live, ca_file)
    assert seen["capabilities"] == {"version": "0.8.0",
                                    "encodings": ["JSON", "JSON_IETF", "PROTO"]}
    gets = {k: v[0] for k, v in seen["get"].items()}
    assert all(len(v) == 1 for v in seen["get"].values())  # one notification per path
    assert {n["target"] for n in gets.values()} == {""}  # no prefix target asked, none sent
    running = live.sim.settings.device_settings("leaf-0")
    mtu = {f"/interfaces/interface[name={key.split('.')[1]}]/config/mtu": value
           for key, value in running.items() if key.endswith(".mtu_bytes")}
    assert len(mtu) > 8
    assert values(gets["CONFIG JSON"]) == mtu
    state = gets["STATE PROTO"]
    assert values(state) == live.leaves(state["timestamp"], STATE, "proto", None)
    assert {kind for kind, _ in state["updates"].values()} == {"uint_val", "string_val"}
    every = gets["ALL JSON_IETF"]
    assert values(every) == {**mtu, **live.leaves(every["timestamp"], STATE, "json_ietf", None)}
    optics = gets["OPERATIONAL PROTO"]
    decimals = {path: [round(v * 10 ** digits(path)), digits(path)] for path, v in
                live.leaves(optics["timestamp"], "/components", "proto", None).items()}
    assert values(optics) == decimals
    assert {kind for kind, _ in optics["updates"].values()} == {"decimal_val"}

    stream = seen["subscribe"][1:]  # after the initial notification
    stamps = [n["timestamp"] for n in stream]
    gaps = np.diff(stamps)
    assert (gaps > 0).all()
    assert (gaps % 100_000_000 == 0).all()
    assert statistics.median(gaps.tolist()) == 100_000_000
    assert {n["target"] for n in stream} == {"leaf-0"}
    for note in stream:
        assert values(note) == live.leaves(note["timestamp"], OCTETS, "json_ietf", None)


def digits(path: str) -> int:
    """Fraction digits of a component's decimal64 leaf: 1 for temperature, 2 for power."""
    return 1 if "temperature" in path else 2
