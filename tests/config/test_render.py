"""Renders per platform, checked against each platform's published schema or syntax.

- openconfig: every leaf is a config path of openconfig/public (openconfig-qos 2.2.0,
  revision 2026-04-30; see fixtures/openconfig_rw_paths.txt for the exact source), and
  enumerations/identities take values those models define.
- sonic: tables and fields are those of sonic-buildimage's
  src/sonic-yang-models/doc/Configuration.md, sonic-pfcwd.yang (detection 100-5000 ms,
  restoration 100-60000 ms) and sonic-wred-profile.yang; DEVICE_METADATA ecmp_hash_seed
  is the field docker-orchagent's switch.json.j2 reads; references resolve.
- eos, nvue, host: golden files for a tiny fabric (fixtures/tiny-*), whose syntax was
  taken from arista.avd's eos_cli_config_gen output, the NVUE command reference, and
  NVIDIA's mlnx_qos / mlx5 ecn sysfs / cma_roce_tos tools.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fabricops.config.contexts import port_ranges
from fabricops.config.plan import FabricPlan, plan_fabric
from fabricops.config.render import RenderError, render_device, render_plan
from fabricops.core.topology import Topology
from tests.conftest import require_program

FIXTURES = Path(__file__).parent / "fixtures"

OC_ENUMS = {
    "type": {"IPV4", "IPV6", "openconfig-qos-types:ONE_RATE_TWO_COLOR",
             "iana-if-type:ethernetCsmacd"},
    "priority": {"STRICT"},
    "input-type": {"QUEUE"},
}

SONIC_FIELDS: dict[str, set[str]] = {
    "DEVICE_METADATA": {"hostname", "buffer_model", "default_pfcwd_status", "ecmp_hash_seed"},
    "SWITCH_HASH": {"ecmp_hash"},
    "PORT": {"mtu"},
    "PORT_QOS_MAP": {"dscp_to_tc_map", "tc_to_pg_map", "tc_to_queue_map", "pfc_to_queue_map",
                     "pfc_enable"},
    "SCHEDULER": {"type", "weight"},
    "WRED_PROFILE": {"ecn", "wred_green_enable", "green_min_threshold", "green_max_threshold",
                     "green_drop_probability"},
    "QUEUE": {"scheduler", "wred_profile"},
    "BUFFER_PROFILE": {"pool", "size", "xon", "xon_offset", "xoff", "dynamic_th"},
    "BUFFER_PG": {"profile"},
    "PFC_WD": {"action", "detection_time", "restoration_time", "POLL_INTERVAL"},
}
SONIC_MAPS = {"DSCP_TO_TC_MAP", "TC_TO_PRIORITY_GROUP_MAP", "TC_TO_QUEUE_MAP",
              "MAP_PFC_PRIORITY_TO_QUEUE", "CABLE_LENGTH"}
SONIC_HASH_FIELDS = {"DST_MAC", "SRC_MAC", "ETHERTYPE", "IP_PROTOCOL", "DST_IP", "SRC_IP",
                     "L4_DST_PORT", "L4_SRC_PORT", "IPV6_FLOW_LABEL"}


def oc_leaves(doc: dict[str, Any]) -> dict[str, list[Any]]:
    """Schema path (list keys dropped) -> values, over every update of a Set payload."""
    found: dict[str, list[Any]] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list) and node and isinstance(node[0], dict):
            for item in node:
                walk(item, path)
        else:
            found.setdefault(path, []).append(node)

    for update in doc["update"]:
        walk(update["val"], update["path"])
    return found


def test_openconfig_uses_only_model_leaves(tiny_plan: FabricPlan) -> None:
    model = {line for line in (FIXTURES / "openconfig_rw_paths.txt").read_text().splitlines()
             if line and not line.startswith("#")}
    text, gaps = render_device(tiny_plan, tiny_plan.switches[0], "openconfig")
    doc = json.loads(text)
    leaves = oc_leaves(doc)
    assert sorted(set(leaves) - model) == []
    assert len(leaves) > 40
    for path, values in leaves.items():
        allowed = OC_ENUMS.get(path.rsplit("/", 1)[-1])
        if allowed:
            assert set(values) <= allowed, path
    assert doc["encoding"] == "JSON_IETF"
    assert doc["not_rendered"] == gaps
    assert any("PFC" in g for g in gaps)
    assert doc["unrendered_intent"]["pfc_no_drop_priorities"] == [3]


def test_openconfig_values_follow_the_intent(tiny_plan: FabricPlan) -> None:
    leaf = tiny_plan.switches[0]
    leaves = oc_leaves(json.loads(render_device(tiny_plan, leaf, "openconfig")[0]))
    wred = "/openconfig-qos:qos/queue-management-profiles/queue-management-profile/wred/" \
           "uniform/config/"
    assert leaves[wred + "min-threshold"] == ["600000"]  # uint64 is a string in JSON_IETF
    assert leaves[wred + "enable-ecn"] == [True]
    assert leaves[wred + "drop"] == [False]
    dedicated = leaves["/openconfig-qos:qos/buffer-allocation-profiles/buffer-allocation-"
                       "profile/queues/queue/config/dedicated-buffer"]
    assert sorted(int(v) for v in dedicated) == sorted({p.headroom_bytes for p in leaf.ports})
    assert set(leaves["/openconfig-interfaces:interfaces/interface/config/mtu"]) == {9100}
    queue_ids = leaves["/openconfig-qos:qos/queues/queue/config/queue-id"]
    assert sorted(queue_ids) == [0, 3, 6]


def test_sonic_uses_config_db_tables_and_fields(tiny_plan: FabricPlan) -> None:
    leaf = tiny_plan.switches[0]
    db = json.loads(render_device(tiny_plan, leaf, "sonic")[0])
    assert set(db) == set(SONIC_FIELDS) | SONIC_MAPS
    for table, fields in SONIC_FIELDS.items():
        for key, entry in db[table].items():
            assert set(entry) <= fields, f"{table}|{key}: {set(entry) - fields}"
    assert set(db["SWITCH_HASH"]["GLOBAL"]["ecmp_hash"]) <= SONIC_HASH_FIELDS
    for table in SONIC_MAPS - {"CABLE_LENGTH"}:
        assert all(isinstance(k, str) and isinstance(v, str)
                   for k, v in db[table]["AZURE"].items())
    assert db["DSCP_TO_TC_MAP"]["AZURE"]["26"] == "3"
    assert len(db["DSCP_TO_TC_MAP"]["AZURE"]) == 64
    for port in leaf.ports:
        assert db["PORT_QOS_MAP"][port.name]["pfc_enable"] == "3"
        assert db["CABLE_LENGTH"]["AZURE"][port.name] == f"{math.ceil(port.cable_m)}m"
        profile = db["BUFFER_PG"][f"{port.name}|3"]["profile"]
        assert db["BUFFER_PROFILE"][profile]["xoff"] == str(port.headroom_bytes)
        assert db["QUEUE"][f"{port.name}|3"]["wred_profile"] in db["WRED_PROFILE"]
        watchdog = db["PFC_WD"][port.name]
        assert 100 <= int(watchdog["detection_time"]) <= 5000
        assert 100 <= int(watchdog["restoration_time"]) <= 60000
        assert watchdog["action"] in {"drop", "forward", "alert"}
    schedulers = {q["scheduler"] for q in db["QUEUE"].values()}
    assert schedulers <= set(db["SCHEDULER"])
    assert db["WRED_PROFILE"]["ROCE_ECN_400G"]["ecn"] == "ecn_all"
    assert db["DEVICE_METADATA"]["localhost"]["ecmp_hash_seed"] == "11"
    assert 100 <= int(db["PFC_WD"]["GLOBAL"]["POLL_INTERVAL"]) <= 1000


@pytest.mark.parametrize(("device", "platform", "golden"), [
    ("leaf-0", "eos", "tiny-leaf-0.eos.cfg"),
    ("leaf-0", "nvue", "tiny-leaf-0.nvue.sh"),
    ("host-000", "host", "tiny-host-000.host.sh"),
])
def test_cli_renders_match_golden_files(tiny_plan: FabricPlan, device: str, platform: str,
                                        golden: str) -> None:
    intent = next(d for d in (*tiny_plan.switches, *tiny_plan.hosts) if d.device == device)
    text, _ = render_device(tiny_plan, intent, platform)
    assert text == (FIXTURES / golden).read_text()


def test_cli_renders_carry_the_key_lines(tiny_plan: FabricPlan) -> None:
    leaf, host = tiny_plan.switches[0], tiny_plan.hosts[0]
    eos = render_device(tiny_plan, leaf, "eos")[0].splitlines()
    assert "   priority-flow-control priority 3 no-drop" in eos
    assert "qos map dscp 26 to traffic-class 3" in eos
    nvue = render_device(tiny_plan, leaf, "nvue")[0].splitlines()
    assert "nv set qos roce mode lossless" in nvue
    assert "nv set qos pfc roce-pfc-50m cable-length 50" in nvue
    assert "nv set system forwarding hash-seed 11" in nvue
    sh = render_device(tiny_plan, host, "host")[0].splitlines()
    assert sh[0] == "#!/bin/sh"
    assert "mlnx_qos -i nic0 --pfc 0,0,0,1,0,0,0,0" in sh
    assert "echo 48 > /sys/class/net/nic0/ecn/roce_np/cnp_dscp" in sh
    assert "cma_roce_tos -d mlx5_1 -t 106" in sh


def test_lossy_mode_drops_every_pfc_setting(tiny: Topology) -> None:
    plan = plan_fabric(tiny, {"pfc": False})
    leaf, host = plan.switches[0], plan.hosts[0]
    assert "priority-flow-control" not in render_device(plan, leaf, "eos")[0]
    nvue = render_device(plan, leaf, "nvue")[0]
    assert "roce mode lossy" in nvue
    assert "qos pfc" not in nvue
    db = json.loads(render_device(plan, leaf, "sonic")[0])
    assert "BUFFER_PG" not in db
    assert "PFC_WD" not in db
    assert db["PORT_QOS_MAP"]["eth1"]["pfc_enable"] == ""
    assert "--pfc 0,0,0,0,0,0,0,0" in render_device(plan, host, "host")[0]


def test_pcp_trust_where_the_platform_has_it(tiny: Topology) -> None:
    plan = plan_fabric(tiny, {"trust": "pcp"})
    leaf = plan.switches[0]
    assert "qos trust cos" in render_device(plan, leaf, "eos")[0]
    assert "trust l2" in render_device(plan, leaf, "nvue")[0]
    for platform in ("openconfig", "sonic"):
        with pytest.raises(RenderError, match=rf"^{platform}: trust=pcp"):
            render_device(plan, leaf, platform)


def test_load_balancing_mode_is_refused_where_absent(tiny: Topology) -> None:
    plan = plan_fabric(tiny, {"load_balancing": "adaptive"})
    leaf = plan.switches[0]
    with pytest.raises(RenderError, match=r"^eos: load_balancing=adaptive is not in this"):
        render_device(plan, leaf, "eos")
    nvue = render_device(plan, leaf, "nvue")[0].splitlines()
    assert "nv set router adaptive-routing state enabled" in nvue
    assert "nv set interface eth3-4 router adaptive-routing state enabled" in nvue
    wcmp = plan_fabric(tiny, {"load_balancing": "wcmp"})
    with pytest.raises(RenderError, match="nvue: load_balancing=wcmp"):
        render_device(wcmp, wcmp.switches[0], "nvue")


def test_host_template_is_for_mlx5_only(tiny: Topology) -> None:
    plan = plan_fabric(tiny.model_copy(update={"params": {**tiny.params,
                                                          "nic_model": "Thor2"}}))
    assert "NIC model Thor2: not mlx5; generic DCQCN values, no host render" in \
        plan.template.reasons
    with pytest.raises(RenderError, match="host: host-000 has NIC model 'Thor2'"):
        render_device(plan, plan.hosts[0], "host")


def test_fractional_cables_round_up_for_platforms_that_size_headroom(tiny: Topology) -> None:
    plan = plan_fabric(tiny.model_copy(update={"params": {**tiny.params,
                                                          "cable_length_m": 2.5}}))
    leaf = plan.switches[0]
    assert "nv set qos pfc roce-pfc-3m cable-length 3" in render_device(plan, leaf, "nvue")[0]
    db = json.loads(render_device(plan, leaf, "sonic")[0])
    assert set(db["CABLE_LENGTH"]["AZURE"].values()) == {"3m"}
    assert set(db["BUFFER_PROFILE"]) == {"pg_lossless_400000_3m_profile"}


def test_render_plan_writes_one_file_per_device(tiny_plan: FabricPlan, tmp_path: Path) -> None:
    result = render_plan(tiny_plan, "sonic", tmp_path / "out")
    assert [f.name for f in result.files] == ["leaf-0.sonic.json", "leaf-1.sonic.json",
                                              "spine-0.sonic.json"]
    for path in result.files:
        json.loads(path.read_text())
    hosts = render_plan(tiny_plan, "host", tmp_path / "out")
    assert [f.name for f in hosts.files] == ["host-000.host.sh", "host-001.host.sh"]
    eos = render_plan(tiny_plan, "eos", tmp_path / "eos")
    assert eos.not_rendered[0].startswith("ECMP hash seed")


def test_render_refuses_unknown_platform_and_wrong_target(tiny_plan: FabricPlan) -> None:
    with pytest.raises(RenderError, match="unknown platform 'junos'; known platforms: "
                                          "openconfig, sonic, eos, nvue, host"):
        render_device(tiny_plan, tiny_plan.switches[0], "junos")
    with pytest.raises(RenderError, match="eos configures switches; host-000 is a host"):
        render_device(tiny_plan, tiny_plan.hosts[0], "eos")


def test_nvue_port_lists_are_ranges() -> None:
    assert port_ranges(["eth1", "eth2", "eth3", "eth7"]) == "eth1-3,eth7"
    assert port_ranges(["swp1s0", "swp1s1", "lo", "swp9", "swp10"]) == "swp1s0-1,lo,swp9-10"
    assert port_ranges(["eth5"]) == "eth5"


@pytest.mark.parametrize("overrides", [{}, {"pfc": False}, {"mtu": 4200}])
@pytest.mark.parametrize(("platform", "shell"), [("nvue", "bash"), ("host", "sh")])
def test_shell_renders_parse_as_the_shell_that_runs_them(
        gpu64: Topology, tmp_path: Path, platform: str, shell: str,
        overrides: dict[str, object]) -> None:
    """NVUE commands run in bash, the host script in POSIX sh: ``-n`` parses without
    running, so a quoting or line-continuation slip in a template fails here."""
    program = require_program(shell, f"to parse the {platform} renders as the shell that "
                                     f"runs them on the device")
    result = render_plan(plan_fabric(gpu64, overrides), platform, tmp_path)
    for path in result.files[:4]:
        done = subprocess.run([program, "-n", str(path)], capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, f"{path.name}: {done.stderr}"
