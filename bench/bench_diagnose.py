"""Fault injected -> named by ``fabricops diagnose``, on the running embedded stack.

Starts ``fabricops up`` (the README's first command on the 512-GPU demo fabric,
without its scripted gray link, collected over SNMP, gNMI and INT in real
time) as its own process, then one
fault at a time: inject it through the API (as ``fabricops sim inject``
does), poll ``/api/v1/diagnose`` (what ``fabricops diagnose`` asks) every
0.2 s until an open incident names the injected entity (or a part of it: a
host's NIC, a NIC's link), and let the fault end (25 s) and its symptoms
settle (15 s) before the next. Prints wall seconds from injection to the first
answer that names it, per fault, and the median and max.

    python bench/bench_diagnose.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

FAULTS = [
    ("link_down", "leaf-1:eth50~spine-4:eth6", {}),
    ("gray_loss", "leaf-2:eth40~spine-1:eth12", {"loss_rate": 1e-3}),
    ("pfc_storm", "host-012:nic3", {}),
    ("nic_down", "host-020:nic5", {}),
    ("slow_receiver", "host-030", {}),
    ("switch_down", "spine-6", {}),
]
HEALTHY = """name: demo-healthy
seed: 7
tick_s: 1.0
topology: {builder: leaf_spine, params: {gpus: 512}}
jobs:
  - {name: job-llm-01, hosts: 56, placement: random, compute_s: 1.0,
     comm_bytes_per_nic: 5.0e+10}
"""
FAULT_S = 25.0
GAP_S = 15.0  # after a fault ends, before the next: its symptoms settle
TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def call(url: str, body: dict[str, Any] | None = None, token: str = "") -> Any:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, data=data, headers=headers,
                                     method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        sys.exit(f"{request.method} {url}: HTTP {exc.code}: {exc.read().decode()[:300]}")


def wait_ready(api: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("fabricops up exited before it was ready")
        try:
            call(f"{api}/api/v1/diagnose")
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    sys.exit("fabricops up was not ready in time")


def names(root: str, entity: str) -> bool:
    """The root is the entity, or one of its parts (a host's NIC, a NIC's link)."""
    return root == entity or root.startswith(f"{entity}:") or entity in root.split("~")


def measure(api: str, token: str, fault: str, entity: str,
            params: dict[str, Any]) -> tuple[float, str]:
    """Seconds until an open incident names ``entity``, and that incident's type and root."""
    body = {"type": fault, "entity": entity, "duration_s": FAULT_S, "params": params}
    started = time.monotonic()
    call(f"{api}/api/v1/sim/faults", body, token)
    seen = ""
    while time.monotonic() - started < TIMEOUT_S:
        for i in call(f"{api}/api/v1/diagnose")["incidents"]:
            seen = f"{i['fault_type']} at {i['root']}"
            if names(i["root"], entity):
                return time.monotonic() - started, seen
        time.sleep(0.2)
    return float("nan"), f"last seen: {seen or 'nothing'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1, help="Passes over the fault list")
    args = parser.parse_args()
    port, token = free_port(), "bench-token"
    with tempfile.TemporaryDirectory() as tmp:
        log = (Path(tmp) / "up.log").open("wb")
        scenario = Path(tmp) / "healthy.yaml"
        scenario.write_text(HEALTHY, encoding="utf-8")
        proc = subprocess.Popen([sys.executable, "-m", "fabricops.cli.main", "up", str(scenario),
                                 "--api-port", str(port), "--api-token", token],
                                cwd=tmp, stdout=log, stderr=subprocess.STDOUT)
        api = f"http://127.0.0.1:{port}"
        try:
            wait_ready(api, proc)
            time.sleep(20.0)  # rates and baselines settle
            results: list[tuple[str, str, float]] = []
            for _ in range(args.rounds):
                for fault, entity, params in FAULTS:
                    took, said = measure(api, token, fault, entity, params)
                    results.append((fault, entity, took))
                    shown = "not named" if took != took else f"{took:5.1f} s"
                    print(f"{fault:15s} {entity:28s} {shown:>9s}  {said}", flush=True)
                    time.sleep(FAULT_S + GAP_S - (took if took == took else TIMEOUT_S))
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
            log.close()
    named = [t for _, _, t in results if t == t]
    print(f"named {len(named)}/{len(results)}; injection -> named: median "
          f"{statistics.median(named):.1f} s, max {max(named):.1f} s (target 10 s)")


if __name__ == "__main__":
    main()
