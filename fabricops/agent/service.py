"""HostAgent: the loop that reads this host's NICs and publishes their frames.

``HostAgent(config, sink)`` is inert. ``start`` discovers the RDMA ports
(``NoRdmaDevicesError`` if there are none: the command says so and exits
non-zero), names them, binds each catalogue metric to the counter that feeds
it, then samples every ``interval_s`` (or what a SamplingPolicy for this host,
or ``"*"``, asks) on its own thread. ``collect`` is one sample, published.

Nothing a NIC's files hold stops the loop: a missing, garbage, truncated or
out-of-range reading is counted by reason (``fabricops_agent_read_problems``),
logged (rate-limited) and left out of that sample; a sample that fails as a
whole is counted under ``errors{cause="sample"}`` and the next one is tried.
Every ``rediscover_s`` devices, LLDP neighbours and bindings are looked up
again (a NIC that appeared, a cable that moved).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry

from fabricops.agent.config import AgentConfig
from fabricops.agent.discovery import NamedNic, find_ports, name_nics
from fabricops.agent.ethtool_text import parse_module
from fabricops.agent.lldp import Neighbours, parse_neighbours
from fabricops.agent.metrics import AgentMetrics
from fabricops.agent.names import Binding, SourceName, bind
from fabricops.agent.sampling import CounterHistory, NicReading, NicValues, evaluate, host_frame
from fabricops.agent.sources import (
    EthtoolSource,
    LiveEthtool,
    NicFiles,
    RecordedEthtool,
    lldp_text,
    read_text,
)
from fabricops.agent.values import Problem, Reason, parse_ib_state, parse_operstate
from fabricops.core.frame import Frame
from fabricops.core.liveness import Liveness
from fabricops.core.logthrottle import ThrottledLog
from fabricops.core.records import SamplingPolicy
from fabricops.core.topology import Topology, load_topology

log = logging.getLogger(__name__)


class FrameSink(Protocol):
    def publish_frames(self, frames: Sequence[Frame]) -> None: ...


@dataclass(frozen=True)
class NicPlan:
    """How one NIC is read: its name, its files, its binding, the names each source needs."""

    nic: NamedNic
    files: NicFiles
    binding: Binding
    needed: dict[SourceName, tuple[str, ...]]


def _needed(binding: Binding) -> dict[SourceName, tuple[str, ...]]:
    out: dict[SourceName, list[str]] = {}
    for choice in (*binding.counters.values(), *binding.extras.values()):
        out.setdefault(choice.source, []).extend(choice.names)
    return {s: tuple(dict.fromkeys(names)) for s, names in out.items()}


class HostAgent:
    """See the module docstring."""

    def __init__(self, config: AgentConfig, sink: FrameSink,
                 registry: CollectorRegistry | None = None, *,
                 ethtool: EthtoolSource | None = None, topology: Topology | None = None,
                 liveness: Liveness | None = None,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.config = config
        self.sink = sink
        self.host = config.host or socket.gethostname().split(".")[0]
        self.metrics = AgentMetrics(registry if registry is not None else CollectorRegistry())
        self.ethtool = ethtool or (LiveEthtool() if config.live else RecordedEthtool(config.root))
        self.topology = topology
        self.liveness = liveness
        self.clock = clock
        self.plans: list[NicPlan] = []
        self.unmatched: list[str] = []
        self.seq = 0
        self.history = CounterHistory()
        self.throttled = ThrottledLog(log)
        self._policies: dict[str, SamplingPolicy] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._discovered_at = 0.0

    @property
    def worker(self) -> str:
        return f"agent:{self.host}"

    def discover(self) -> list[NicPlan]:
        """Find, name and bind this host's NICs (NoRdmaDevicesError if it has none)."""
        if self.topology is None and self.config.topology is not None:
            self.topology = load_topology(self.config.topology)
        root = self.config.root
        ports = find_ports(root)
        neighbours = self._neighbours()
        named, unmatched = name_nics(self.host, ports, names=self.config.nics, lldp=neighbours,
                                     topology=self.topology)
        plans = []
        for nic in named:
            files = NicFiles(root, nic.rdma)
            names = files.names()
            if nic.rdma.netdev is not None:
                stats = self.ethtool.statistics(nic.rdma.netdev)
                self._count(stats.problems)
                names["ethtool"] = frozenset(stats.values)
            binding = bind(names)
            plans.append(NicPlan(nic, files, binding, _needed(binding)))
        self._publish_plan(plans, unmatched)
        self.plans, self.unmatched = plans, unmatched
        self._discovered_at = time.monotonic()
        return plans

    def _neighbours(self) -> Neighbours:
        if not self.config.lldp:
            return {}
        text = lldp_text(self.config.root, self.config.live)
        if isinstance(text, Problem):
            self._count([text])
            return {}
        if text is None:
            return {}
        found, problems = parse_neighbours(text, "lldp neighbours")
        self._count(problems)
        return found

    def _publish_plan(self, plans: list[NicPlan], unmatched: list[str]) -> None:
        m = self.metrics
        m.nics.set(len(plans))
        m.unmatched.set(len(unmatched))
        m.nic_info.clear()
        for p in plans:
            n = p.nic
            m.nic_info.labels(n.entity, n.rdma.label, n.rdma.netdev or "", n.switch_port or "",
                              n.named_by).set(1)
            m.unavailable.labels(n.entity).set(len(p.binding.unavailable))
        for line in unmatched:
            self.throttled.warning(f"lldp:{line}", "%s: LLDP neighbour not in the topology: %s",
                                   self.host, line)

    def read(self, plan: NicPlan) -> NicReading:
        """One NIC's raw readings (the file system and ethtool)."""
        reading = NicReading(plan.nic.entity)
        for source, names in plan.needed.items():
            if source != "ethtool":
                reading.raw[source] = dict(plan.files.read(source, names))
        netdev = plan.nic.rdma.netdev
        if netdev is not None and "ethtool" in plan.needed:
            stats = self.ethtool.statistics(netdev)
            reading.problems.extend(stats.problems)
            reading.raw["ethtool"] = {n: stats.values[n] for n in plan.needed["ethtool"]
                                      if n in stats.values}
            if not stats.values:
                reading.failed.add("ethtool")
        if plan.files.net_dir is not None:
            path = plan.files.net_dir / "operstate"
            text = read_text(path)
            reading.oper_status = text if isinstance(text, Problem) else \
                parse_operstate(text, str(path))
        else:
            path = plan.files.port_dir / "state"
            text = read_text(path)
            reading.oper_status = text if isinstance(text, Problem) else \
                parse_ib_state(text, str(path))
        if self.config.optics and netdev is not None:
            module = self.ethtool.module(netdev)
            if module is not None:
                reading.module = parse_module(module, f"ethtool -m {netdev}")
        return reading

    def sample(self, ts_ns: int | None = None) -> Frame:
        """Read every NIC once and build the frame (not published); count what failed."""
        ts = self.clock() if ts_ns is None else ts_ns
        nics: list[NicValues] = []
        for plan in self.plans:
            values = evaluate(plan.binding, self.read(plan))
            self._count(values.problems)
            for reset in self.history.update(values, ts):
                self.metrics.resets.inc()
                self.throttled.warning(f"reset:{reset.entity}", "%s %s went back from %d to %d: "
                                       "counted as a reset", reset.entity, reset.metric,
                                       reset.before, reset.after)
            for label, value in values.extras.items():
                self.metrics.nic_extra.labels(values.entity, label).set(value)
            nics.append(values)
        self.seq += 1
        return host_frame(self.host, ts, self.seq, nics)

    def _count(self, problems: Sequence[Problem]) -> None:
        for p in problems:
            self.metrics.read_problems.labels(p.reason.value).inc()
            self.throttled.warning(f"{p.reason}:{p.where}", "%s: %s", self.host, p)

    def collect(self, ts_ns: int | None = None) -> Frame | None:
        """One sample, published; None (counted and logged) if it failed."""
        try:
            frame = self.sample(ts_ns)
        except Exception as exc:  # a reading nobody foresaw; the next sample is tried
            self.metrics.errors.labels("sample").inc()
            self.throttled.error("sample", "%s: sample failed: %r", self.host, exc)
            return None
        try:
            self.sink.publish_frames([frame])
        except Exception as exc:
            self.metrics.errors.labels("publish").inc()
            self.throttled.error("publish", "%s: publish failed: %r", self.host, exc)
            return None
        self.metrics.frames.inc()
        self.metrics.samples.inc(frame.n_samples)
        return frame

    def apply_policy(self, policy: SamplingPolicy) -> None:
        """Follow a sampling policy for this host (or ``"*"``); newer ones win."""
        if policy.device not in (self.host, "*"):
            return
        with self._lock:
            held = self._policies.get(policy.device)
            if held is None or held.ts_ns <= policy.ts_ns:
                self._policies[policy.device] = policy
        self._wake.set()

    def interval_s(self) -> float:
        """The sampling interval in force, in seconds."""
        now = time.time_ns()
        with self._lock:
            for key in (self.host, "*"):
                p = self._policies.get(key)
                if p is not None and (p.expires_ns is None or p.expires_ns > now):
                    return p.interval_s
        return self.config.interval_s

    def start(self) -> None:
        """Discover the NICs (errors raise here), then sample on a thread."""
        self.discover()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.worker, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.throttled.flush()

    def _run(self) -> None:
        if self.liveness is not None:
            self.liveness.alive(self.worker)
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if started - self._discovered_at >= self.config.rediscover_s:
                    self._rediscover()
                self.collect()
                interval = self.interval_s()
                self.metrics.interval.set(interval)
                self._wake.clear()
                self._wake.wait(max(0.0, interval - (time.monotonic() - started)))
        except BaseException as exc:
            if self.liveness is not None:
                self.liveness.dead(self.worker, f"sampling loop ended: {exc!r}")
            raise

    def _rediscover(self) -> None:
        try:
            self.discover()
        except Exception as exc:  # keep reading what was found before
            self.metrics.errors.labels("discover").inc()
            self._discovered_at = time.monotonic()
            self.throttled.error("discover", "%s: rediscovery failed, keeping %d NICs: %s",
                                 self.host, len(self.plans), exc)


__all__ = ["FrameSink", "HostAgent", "NicPlan", "Reason"]
