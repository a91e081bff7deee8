"""Series count of every fabricops /metrics on a 16,384-GPU rail-optimized fabric.

Builds each process's registry as the process does (collectors with every switch
as an SNMP and a gNMI target, the pipeline with the fabric aggregates under the
default bounds and unbounded, one host agent with its eight NICs), renders it
with prometheus_client's ``generate_latest`` and counts the samples a Prometheus
server would store (``_created`` samples included: Prometheus ingests them as
series unless told otherwise). Also reports the CPU time of rendering the
pipeline's /metrics beside a baseline: a registry of plain gauges with as many
series.

Run: ``python bench/bench_metrics_cardinality.py [--gpus 16384]``
"""

from __future__ import annotations

import argparse
import time

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from fabricops.agent.metrics import AgentMetrics
from fabricops.api.fabric_metrics import FabricMetrics, FabricMetricsConfig
from fabricops.api.platform_metrics import NewestFrameTime, PlatformMetrics, PlatformMetricsConfig
from fabricops.collectors.collection import CollectionStatus
from fabricops.collectors.gnmi import GnmiCollector, GnmiCollectorConfig
from fabricops.collectors.gnmi_config import GnmiEndpoint
from fabricops.collectors.int_receiver import IntReceiver, IntReceiverConfig
from fabricops.collectors.snmp import SnmpPoller, SnmpPollerConfig, SnmpTarget
from fabricops.core.liveness import Liveness
from fabricops.core.membus import MemoryBus
from fabricops.core.topology import Topology
from fabricops.pipeline.worker_metrics import WorkerMetrics
from fabricops.simulator.builders import rail_optimized
from fabricops.store.metrics import StoreMetrics


class _Sink:
    def publish_frames(self, frames: object) -> None:
        return None

    def publish_int(self, batch: object) -> None:
        return None


class _Collection:
    def __init__(self, switches: int) -> None:
        self.switches = switches

    def status(self) -> CollectionStatus:
        n = self.switches
        return CollectionStatus(targets_up={"snmp": (n, n), "gnmi": (n, n), "int": (1, 1)},
                                frames={}, samples={}, int_reports=0, int_hops=0)


def count(registry: CollectorRegistry) -> tuple[int, int]:
    """Samples of one scrape (lines that are not comments), and those without ``_created``
    (what is stored with ``PROMETHEUS_DISABLE_CREATED_SERIES=True``)."""
    text = generate_latest(registry).decode()
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    created = sum(1 for line in lines if line.split("{")[0].split(" ")[0].endswith("_created"))
    return len(lines), len(lines) - created


def collector_registry(switches: list[str]) -> CollectorRegistry:
    reg = CollectorRegistry()
    SnmpPoller(SnmpPollerConfig(targets=tuple(SnmpTarget(device=d) for d in switches)),
               _Sink(), reg)
    GnmiCollector(GnmiCollectorConfig(targets=tuple(
        GnmiEndpoint(device=d, address=f"{d}:57400") for d in switches)), _Sink(), reg)
    IntReceiver(IntReceiverConfig(), _Sink(), reg)
    PlatformMetrics(PlatformMetricsConfig(), collection=_Collection(len(switches)), registry=reg)
    return reg


def pipeline_registry(topo: Topology, config: FabricMetricsConfig) -> CollectorRegistry:
    reg = CollectorRegistry()
    WorkerMetrics(reg)
    StoreMetrics(reg)
    fabric = FabricMetrics(config, MemoryBus(), topo, reg, liveness=Liveness(reg))
    fabric._rx_power[:] = -3.0  # worst case: every link has optics that reported
    newest = NewestFrameTime()
    newest.observe([], time.time_ns())
    PlatformMetrics(PlatformMetricsConfig(), newest_frame_ns=newest, registry=reg)
    return reg


def agent_registry(host: str, nics: int) -> CollectorRegistry:
    reg = CollectorRegistry()
    m = AgentMetrics(reg)
    for n in range(nics):
        port = f"{host}:nic{n}"
        m.nic_info.labels(port, f"mlx5_{n}/1", f"ens{n}np0", f"leaf-{n}:eth1", "lldp").set(1)
        m.unavailable.labels(port).set(0)
        for counter in ("rx_pause_duration_us", "ecn_marked_roce_packets_received"):
            m.nic_extra.labels(port, counter).set(0)
    return reg


def render_cpu_s(registry: CollectorRegistry, repeat: int) -> float:
    start = time.process_time()
    for _ in range(repeat):
        generate_latest(registry)
    return (time.process_time() - start) / repeat


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=16384)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    topo = rail_optimized(gpus=args.gpus)
    switches = [n.id for n in topo.nodes if not n.is_host]
    hosts = [n for n in topo.nodes if n.is_host]
    nics = len(hosts[0].ports)
    bounded = FabricMetricsConfig()
    unbounded = FabricMetricsConfig(max_links=len(topo.links), max_switches=len(switches))
    collectors = count(collector_registry(switches))
    pipeline_reg = pipeline_registry(topo, bounded)
    pipeline = count(pipeline_reg)
    pipeline_all = count(pipeline_registry(topo, unbounded))
    agent = count(agent_registry(hosts[0].id, nics))
    agents = (agent[0] * len(hosts), agent[1] * len(hosts))
    total = tuple(c + p + a for c, p, a in zip(collectors, pipeline, agents, strict=True))
    print(f"rail-optimized {args.gpus:,} GPUs: {len(switches):,} switches, {len(hosts):,} hosts, "
          f"{len(topo.links):,} links")
    print(f"bounds: max_links={bounded.max_links:,} max_switches={bounded.max_switches:,}; "
          "series (without _created)")
    rows = (("collector process (SNMP + gNMI for every switch, INT)", collectors),
            ("pipeline process (fabric aggregates, bounded)", pipeline),
            ("pipeline process, fabric aggregates unbounded", pipeline_all),
            (f"one host agent ({nics} NICs)", agent),
            (f"all host agents ({len(hosts):,})", agents),
            ("total with the bounds in force", total))
    for label, (n, without) in rows:
        print(f"  {label:<56} {n:>9,} ({without:,})")
    baseline = CollectorRegistry()
    gauge = Gauge("baseline_value", "Plain gauges, one per series", ["i"], registry=baseline)
    for i in range(pipeline[0]):
        gauge.labels(str(i)).set(i)
    cpu = render_cpu_s(pipeline_reg, args.repeat)
    base = render_cpu_s(baseline, args.repeat)
    print(f"pipeline /metrics render: {cpu * 1e3:.1f} ms CPU; baseline "
          f"({pipeline[0]:,} plain gauges): {base * 1e3:.1f} ms CPU")


if __name__ == "__main__":
    main()
