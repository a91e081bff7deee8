"""``serve sim`` and ``up`` put TLS and a login on the simulated gNMI target and give the
same to whoever reads it: the inventory ``serve sim`` writes, the collectors of ``up``."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from pygnmi.client import gNMIclient, gNMIException
from typer.testing import CliRunner

from fabricops.cli.main import app
from fabricops.core.inventory import load_inventory

pytestmark = pytest.mark.integration
ENV = {"COLUMNS": "200", "FORCE_COLOR": ""}
SCENARIO = ("name: small\nseed: 1\nduration_s: 10\n"
            "topology: {builder: leaf_spine, params: {gpus: 16}}\n"
            "jobs: [{name: job-a, hosts: 2, compute_s: 0.0, comm_bytes_per_nic: 1.0e+15}]\n")
OCTETS = "/interfaces/interface[name=eth1]/state/counters/in-octets"


@pytest.mark.parametrize("command", [["serve", "sim"], ["up"]], ids=" ".join)
def test_help_says_where_the_gnmi_password_comes_from(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"], env=ENV)
    text = " ".join(result.stdout.split())
    for flag in ("--gnmi-tls-cert", "--gnmi-tls-key", "--gnmi-tls-self-signed",
                 "--gnmi-username", "--gnmi-password-file", "$FABRICOPS_GNMI_PASSWORD"):
        assert flag in text, flag
    assert "never from the command line" in text
    assert not re.search(r"--gnmi-password\b(?!-file)", text)


def test_serve_sim_serves_tls_and_a_login_and_its_inventory_reaches_it(tmp_path: Path) -> None:
    (tmp_path / "small.yaml").write_text(SCENARIO, encoding="utf-8")
    secret = tmp_path / "gnmi.pw"
    secret.write_text("s3cret\n", encoding="utf-8")
    out = tmp_path / "sim"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICOPS_")}
    with (tmp_path / "sim.log").open("w") as log:
        sim = subprocess.Popen(
            [sys.executable, "-m", "fabricops.cli.main", "serve", "sim", "small.yaml",
             "--duration", "90", "--out", str(out), "--snmp-port", "0", "--gnmi-port", "0",
             "--api-port", "0", "--speed", "4", "--gnmi-tls-self-signed",
             "--gnmi-username", "admin", "--gnmi-password-file", str(secret)],
            cwd=tmp_path, env={**env, **ENV}, stdout=log, stderr=log)
        try:
            inventory_file = _appears(out / "inventory.yaml", sim)
            gnmi = load_inventory(inventory_file).by_protocol("gnmi")
            collected = CliRunner().invoke(app, ["collect", "gnmi", "-i", str(inventory_file),
                                                 "--bus", "memory", "--duration", "4"], env=ENV)
            _check_pygnmi(gnmi[0].address, gnmi[0].gnmi.ca_file)
        finally:
            sim.terminate()
            sim.wait(30)
    assert stat.S_IMODE(inventory_file.stat().st_mode) == 0o600
    first = gnmi[0].gnmi
    assert (first.insecure, first.username, first.password) == (False, "admin", "s3cret")
    assert first.ca_file == (out / "gnmi-target.crt").resolve()
    assert collected.exit_code == 0, collected.output
    up = re.search(r"gnmi (\d+)/(\d+) up ([\d,]+) frames", " ".join(collected.stderr.split()))
    assert up is not None, collected.stderr
    assert up.group(1) == up.group(2) == str(len(gnmi))
    started = " ".join((tmp_path / "sim.log").read_text().split())
    assert re.search(r"gNMI :\d+ TLS \(.*gnmi-target\.crt\), login admin", started), started


def _appears(path: Path, process: subprocess.Popen[bytes], timeout_s: float = 60) -> Path:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert process.poll() is None, "serve sim ended before writing its inventory"
        assert time.monotonic() < deadline, f"no {path} after {timeout_s} s"
        time.sleep(0.2)
    return path


def _check_pygnmi(address: str, ca_file: Path | None) -> None:
    host, port = address.rsplit(":", 1)
    with gNMIclient(target=(host, int(port)), username="admin", password="s3cret",
                    path_cert=str(ca_file)) as client:
        got = client.get(path=[OCTETS], target="leaf-0", encoding="json_ietf")
    assert int(got["notification"][0]["update"][0]["val"]) >= 0
    wrong = gNMIclient(target=(host, int(port)), username="admin", password="guess",
                       path_cert=str(ca_file))
    with pytest.raises(gNMIException) as err:
        wrong.connect()
    wrong.close()
    assert err.value.orig_exc.code() is grpc.StatusCode.UNAUTHENTICATED


def test_up_collects_over_tls_with_a_login(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "small.yaml").write_text(SCENARIO, encoding="utf-8")
    db = f"sqlite:///{tmp_path / 'f.db'}"
    result = CliRunner().invoke(app, [
        "up", "small.yaml", "--duration", "4", "--speed", "4", "--db", db, "--api-port", "0",
        "--int-port", "0", "--gnmi-tls-self-signed", "--gnmi-username", "admin"],
        env={**ENV, "FABRICOPS_GNMI_PASSWORD": "s3cret"})
    assert result.exit_code == 0, result.output
    line = " ".join(result.stderr.split())
    up = re.search(r"gnmi (\d+)/(\d+) up ([\d,]+) frames", line)
    assert up is not None, line
    assert up.group(1) == up.group(2), "every gNMI target streamed over TLS with the login"
    assert int(up.group(3).replace(",", "")) > 0
    assert "TLS (fabricops-data/gnmi-target.crt), login admin" in line
    assert (tmp_path / "fabricops-data" / "gnmi-target.key").stat().st_mode & 0o077 == 0
