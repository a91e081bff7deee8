"""Host agent: CPU time of one sample of a GPU server with 8 NICs, beside a file-read floor.

The tree is the simulator's host tree of one host of a 128-GPU leaf-spine
fabric (8 mlx5 NICs: sysfs counters, ``ethtool -S`` and ``ethtool -m``
recordings). Each figure is ``time.process_time`` of this process over
``--samples`` samples. The baseline, measured in the same run, reads the same
files the agent reads (bytes only, no parsing): what any reader pays.

    python bench/bench_agent.py [--samples N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fabricops.agent.config import AgentConfig
from fabricops.agent.service import HostAgent
from fabricops.evaluation.scenarios import topology_of
from fabricops.simulator.engine import Simulator
from fabricops.simulator.host_trees import HostTreeWriter
from fabricops.simulator.workload import JobSpec


class NullSink:
    def publish_frames(self, frames: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=200)
    n = parser.parse_args().samples
    topo = topology_of(0)
    sim = Simulator(topo)
    sim.add_job(JobSpec(hosts=16, placement="random", compute_s=0.5, comm_bytes_per_nic=40e9))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        sim.step()
        writer = HostTreeWriter(sim, out)
        writer.write()
        root = out / "host-000"
        agent = HostAgent(AgentConfig(root=root, host="host-000"), NullSink(), topology=topo)
        agent.discover()
        files = [p for p in root.rglob("*") if p.is_file() and "lldp" not in p.parts]
        t0 = time.process_time()
        for _ in range(n):
            for f in files:
                f.read_bytes()
        floor = (time.process_time() - t0) / n
        t0 = time.process_time()
        for i in range(n):
            frame = agent.collect(ts_ns=10**18 + i * 10**9)
        spent = (time.process_time() - t0) / n
        assert frame is not None
    print(f"NICs {len(agent.plans)}, samples per frame {frame.n_samples}, files {len(files)}")
    print(f"baseline (read the files, no parsing): {floor * 1e3:.2f} ms CPU per sample")
    print(f"agent (read, parse, map, frame):       {spent * 1e3:.2f} ms CPU per sample "
          f"({spent / floor:.1f}x the baseline; {1 / spent:,.0f} samples per CPU-second)")


if __name__ == "__main__":
    main()
