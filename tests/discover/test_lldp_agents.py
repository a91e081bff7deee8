"""The simulator's agents serve LLDP-MIB from the true cabling, readable by net-snmp."""

from __future__ import annotations

import os
import subprocess

import pytest

from fabricops.simulator.builders import fat_tree
from fabricops.simulator.faults import FaultError, MiswireSpec, miswired_peers
from tests.conftest import require_program
from tests.discover.fabric import serving

REM_SYS_NAME = "1.0.8802.1.1.2.1.4.1.1.9"
REM_PORT_ID = "1.0.8802.1.1.2.1.4.1.1.7"


def _walk(port: int, community: str, oid: str) -> dict[str, str]:
    out = subprocess.run(
        ["snmpbulkwalk", "-m", "", "-On", "-Oq", "-v2c", "-c", community, "-t", "2",
         f"127.0.0.1:{port}", oid],
        capture_output=True, text=True, env=dict(os.environ, MIBS=""), timeout=30, check=True)
    rows = (line.split(" ", 1) for line in out.stdout.splitlines() if line.strip())
    return {k.removeprefix(f".{oid}."): v.strip('"') for k, v in rows}


@pytest.mark.integration
def test_a_leaf_port_shows_the_host_and_its_nic_and_follows_a_miswire() -> None:
    require_program("snmpbulkwalk", "to read the simulated LLDP-MIB with net-snmp")
    built = fat_tree(k=4)
    with serving(built) as fabric:
        names = _walk(fabric.snmp.port, "leaf-0-0", REM_SYS_NAME)
        ports = _walk(fabric.snmp.port, "leaf-0-0", REM_PORT_ID)
        assert names["0.1.1"] == "host-000"
        assert ports["0.1.1"] == "nic0"
        assert names["0.3.1"] == "agg-0-0"
        host_link = built.link_of_port("leaf-0-0:eth1")
        other = built.link_of_port("leaf-1-0:eth1")
        fabric.cabling.miswire(MiswireSpec(links=(host_link, other)))
        assert _walk(fabric.snmp.port, "leaf-0-0", REM_SYS_NAME)["0.1.1"] == "host-004"


def test_a_miswire_swaps_far_ends_and_names_bad_links() -> None:
    topo = fat_tree(k=4)
    a, b = topo.links[0], topo.links[1]
    peers = miswired_peers(topo, [MiswireSpec(links=(a.id, b.id))])
    assert peers[a.a] == b.b
    assert peers[b.b] == a.a
    assert peers[b.a] == a.b
    assert peers[a.b] == b.a
    assert miswired_peers(topo, [MiswireSpec(links=(a.id, b.id))] * 2) == topo.peer_of
    with pytest.raises(FaultError, match="both must be links"):
        miswired_peers(topo, [MiswireSpec(links=(a.id, "leaf-0-0:eth9~x:eth1"))])
    with pytest.raises(FaultError, match="with itself"):
        miswired_peers(topo, [MiswireSpec(links=(a.id, a.id))])
