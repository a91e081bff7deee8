"""Training jobs and their RoCEv2 flows.

A job runs on a set of hosts and alternates a compute phase (no traffic) with a
collective phase in which every NIC sends ``comm_bytes_per_nic`` bytes: a ring
AllReduce over each rail (NIC r of host i sends to NIC r of host i+1), or a
pipeline chain (no wrap-around). The collective ends when its slowest flow is
done, so one slow link stalls the whole job. A job with ``stop_s`` ends then:
its flows stop and its hosts are free again, as when a job finishes. Every
NIC-to-NIC connection is ``qps_per_pair`` flows, each a RoCEv2 5-tuple with
its own UDP source port.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fabricops.simulator.fabric import Fabric
from fabricops.simulator.routing import flow_keys

I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
B = npt.NDArray[np.bool_]
ROCE_SPORT_BASE = 49152


def roce_sports(rng: np.random.Generator, n: int) -> U64:
    """``n`` random RoCEv2 UDP source ports (49152-65535), one per queue pair."""
    return np.uint64(ROCE_SPORT_BASE) + rng.integers(0, 16384, n).astype(np.uint64)


class JobSpec(BaseModel):
    """A training job to place on the fabric."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="job-llm-01", pattern=r"^job-[A-Za-z0-9_.\-]+$")
    hosts: int = Field(default=8, ge=2, description="Number of servers the job runs on")
    placement: Literal["packed", "random"] = "packed"
    collective: Literal["ring_allreduce", "pipeline"] = "ring_allreduce"
    qps_per_pair: int = Field(default=2, ge=1, le=64)
    compute_s: float = Field(default=1.0, ge=0, description="Compute phase per step")
    comm_bytes_per_nic: float = Field(default=50e9, gt=0, description="Bytes a NIC sends a step")
    start_s: float = Field(default=0.0, ge=0)
    stop_s: float | None = Field(default=None, gt=0,
                                 description="The job ends (its flows stop); None: never")

    @model_validator(mode="after")
    def _stops_after_start(self) -> JobSpec:
        if self.stop_s is not None and self.stop_s <= self.start_s:
            raise ValueError(f"stop_s ({self.stop_s:g}) must come after start_s "
                             f"({self.start_s:g})")
        return self


class BackgroundSpec(BaseModel):
    """Steady traffic outside every job (storage, checkpoints, data loading): flows
    between random NICs of one rail on different hosts, each asking for ``share`` of
    its NIC's line rate all the time."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    flows: int = Field(default=64, ge=1, le=1_000_000)
    share: float = Field(default=0.05, gt=0, le=1, description="Of the NIC's line rate")


@dataclass
class FlowTable:
    """Every flow ever created, as arrays. Flows are never removed, only deactivated."""

    src_nic: I32 = field(default_factory=lambda: np.zeros(0, np.int32))
    dst_nic: I32 = field(default_factory=lambda: np.zeros(0, np.int32))
    job: I32 = field(default_factory=lambda: np.zeros(0, np.int32))
    sport: U64 = field(default_factory=lambda: np.zeros(0, np.uint64))
    active: B = field(default_factory=lambda: np.zeros(0, bool))
    fixed_demand_bps: F64 = field(default_factory=lambda: np.zeros(0))
    bytes_left: F64 = field(default_factory=lambda: np.zeros(0))

    def __len__(self) -> int:
        return len(self.src_nic)

    def append(self, src: I32, dst: I32, job: int, sport: U64, demand_bps: float = 0.0) -> I32:
        """Add flows; return their indices."""
        n0, n = len(self), len(src)
        self.src_nic = np.concatenate((self.src_nic, src.astype(np.int32)))
        self.dst_nic = np.concatenate((self.dst_nic, dst.astype(np.int32)))
        self.job = np.concatenate((self.job, np.full(n, job, np.int32)))
        self.sport = np.concatenate((self.sport, sport.astype(np.uint64)))
        self.active = np.concatenate((self.active, np.ones(n, bool)))
        self.fixed_demand_bps = np.concatenate((self.fixed_demand_bps, np.full(n, demand_bps)))
        self.bytes_left = np.concatenate((self.bytes_left, np.zeros(n)))
        return np.arange(n0, n0 + n, dtype=np.int32)

    def keys(self, idx: I32) -> tuple[U64, U64]:
        """ECMP hash keys (with and without the UDP source port) of the given flows."""
        src_ip = self.src_nic[idx].astype(np.uint64) + np.uint64(0x0A000001)
        dst_ip = self.dst_nic[idx].astype(np.uint64) + np.uint64(0x0A000001)
        sport = self.sport[idx]
        return (
            flow_keys(src_ip, dst_ip, sport, with_l4=True),
            flow_keys(src_ip, dst_ip, sport, with_l4=False),
        )


COMPUTE, COMM, WAITING, ENDED = 0, 1, 2, 3
PHASE_TOLERANCE = 1e-6  # of a tick: a phase that ends this close to a tick's end ends with it


class Workload:
    """Jobs, their hosts and phases, and the demand they put on their flows."""

    def __init__(self, fabric: Fabric, rng: np.random.Generator) -> None:
        self.fabric = fabric
        self.rng = rng
        self.flows = FlowTable()
        self.specs: list[JobSpec] = []
        self.hosts: list[list[int]] = []
        self.phase = np.zeros(0, np.int8)
        self.compute_left = np.zeros(0)
        self.steps = np.zeros(0, np.int64)
        self.busy = np.zeros(fabric.n_nodes, dtype=bool)
        self.drained = np.zeros(fabric.n_nodes, dtype=bool)
        self.ingress_limits: dict[int, tuple[float, int]] = {}  # nic -> (share, kept job)
        self._host_nics = {
            int(h): np.array(
                [fabric.port_nic[p] for p in fabric.node_ports(int(h))], dtype=np.int32
            )
            for h in np.flatnonzero(fabric.node_is_host)
        }

    def limit_ingress(self, nic: int, share: float, keep_job: int) -> float:
        """Pace the traffic into ``nic`` from flows outside job ``keep_job`` (-1: every
        flow) to ``share`` of the NIC's line rate; 1 lifts the limit. Returns the share
        in force before."""
        previous = self.ingress_limits.pop(nic, (1.0, -1))[0]
        if share < 1.0:
            self.ingress_limits[nic] = (share, keep_job)
        return previous

    def paced(self, demand: F64) -> F64:
        """``demand`` with every ingress limit applied: the limited flows into a NIC
        scaled down together, so that they want at most its share of the line rate."""
        if not self.ingress_limits:
            return demand
        fl, out = self.flows, demand.copy()
        speed = self.fabric.port_speed_bps[self.fabric.nic_ports]
        for nic, (share, keep_job) in self.ingress_limits.items():
            limited = np.flatnonzero((fl.dst_nic == nic) & (fl.job != keep_job)
                                     if keep_job >= 0 else fl.dst_nic == nic)
            total = float(out[limited].sum())
            allowed = share * float(speed[nic])
            if total > allowed:
                out[limited] *= allowed / total
        return out

    def free_hosts(self) -> list[int]:
        """Hosts in no job and not drained: the spares."""
        return [h for h in self._host_nics if not self.busy[h] and not self.drained[h]]

    def nic_count(self, job: int) -> int:
        """NICs the job currently runs on."""
        return sum(len(self._host_nics[h]) for h in self.hosts[job])

    def add_job(self, spec: JobSpec) -> I32:
        """Place a job on free hosts and create its flows; return the new flow indices."""
        if any(s.name == spec.name for s in self.specs):
            raise ValueError(f"job {spec.name!r} is defined twice")
        free = self.free_hosts()
        if spec.hosts > len(free):
            raise ValueError(
                f"job {spec.name!r} wants {spec.hosts} hosts but only {len(free)} are free"
            )
        if spec.placement == "random":
            hosts = self.rng.choice(free, size=spec.hosts, replace=False).tolist()
        else:
            hosts = free[: spec.hosts]
        self.specs.append(spec)
        self.hosts.append([])
        self.phase = np.append(self.phase, np.int8(WAITING))
        self.compute_left = np.append(self.compute_left, spec.compute_s)
        self.steps = np.append(self.steps, 0)
        return self.set_hosts(len(self.specs) - 1, hosts)

    def set_hosts(self, job: int, hosts: list[int]) -> I32:
        """(Re)form a job's collective on ``hosts``: old flows stop, new ones start.

        The step in progress is lost, as when a job restarts from a checkpoint. A job
        that has ended keeps no hosts and starts no flows.
        """
        if self.phase[job] == ENDED:
            return np.zeros(0, np.int32)
        self._release(job)
        self.hosts[job] = list(hosts)
        self.busy[hosts] = True
        if self.phase[job] != WAITING:
            self.phase[job] = COMPUTE
            self.compute_left[job] = self.specs[job].compute_s
        return self._ring_flows(job)

    def _ring_flows(self, job: int) -> I32:
        spec = self.specs[job]
        hosts = self.hosts[job]
        nics = np.stack([self._host_nics[h] for h in hosts])  # hosts x rails
        nxt = np.roll(nics, -1, axis=0)
        if spec.collective == "pipeline":
            nics, nxt = nics[:-1], nxt[:-1]
        src = np.repeat(nics.ravel(), spec.qps_per_pair)
        dst = np.repeat(nxt.ravel(), spec.qps_per_pair)
        return self.flows.append(src, dst, job, roce_sports(self.rng, len(src)))

    def begin_tick(self, t_s: float, dt_s: float) -> F64:
        """Advance phases to time ``t_s``; return each job's share of the tick spent in comm.

        A compute phase ends within the tick where its time runs out; what is left
        of that tick is spent in the collective, so a job's rhythm does not depend
        on the tick length (beyond the collective's own end, which waits for the
        tick's end).
        """
        share = np.zeros(len(self.specs))
        for j, spec in enumerate(self.specs):
            if spec.stop_s is not None and t_s >= spec.stop_s and self.phase[j] != ENDED:
                self._end(j)
            if self.phase[j] == WAITING and t_s + dt_s > spec.start_s and self.hosts[j]:
                self.phase[j] = COMPUTE
                self.compute_left[j] = spec.compute_s + max(0.0, spec.start_s - t_s)
            if self.phase[j] == COMPUTE:
                self.compute_left[j] -= dt_s
                if self.compute_left[j] < -PHASE_TOLERANCE * dt_s:
                    self._start_comm(j)
                    share[j] = min(1.0, -self.compute_left[j] / dt_s)
            elif self.phase[j] == COMM:
                share[j] = 1.0
        return share

    def _release(self, job: int) -> None:
        """The job's hosts are spares again and its flows stop."""
        for h in self.hosts[job]:
            self.busy[h] = False
        self.flows.active[self.flows.job == job] = False

    def _end(self, job: int) -> None:
        """The job is over: its flows stop and its hosts are spares again."""
        self._release(job)
        self.flows.bytes_left[self.flows.job == job] = 0.0
        self.hosts[job] = []
        self.phase[job] = ENDED

    def _start_comm(self, job: int) -> None:
        spec = self.specs[job]
        mine = (self.flows.job == job) & self.flows.active
        self.flows.bytes_left[mine] = spec.comm_bytes_per_nic / spec.qps_per_pair
        self.phase[job] = COMM

    def demand_bps(self, share: F64, line_bps: F64, dt_s: float, efficiency: F64) -> F64:
        """Wire rate each flow wants this tick (bits/s), before congestion control.

        A flow near the end of its collective asks only for what delivers its
        remaining bytes within the tick, given the share of its wire rate that
        arrives as new data (``efficiency``, below 1 under loss).
        """
        fl = self.flows
        in_job = fl.job >= 0
        job_share = np.where(in_job, np.append(share, 0.0)[fl.job], 0.0)
        remaining = fl.bytes_left * 8.0 / dt_s / np.maximum(efficiency, 1e-9)
        want = np.minimum(line_bps * job_share, remaining)
        demand = np.where(in_job, want, fl.fixed_demand_bps)
        return np.where(fl.active, demand, 0.0)

    def advance(self, goodput_bps: F64, dt_s: float) -> None:
        """Count the bytes delivered this tick; end collectives whose flows are all done."""
        fl = self.flows
        left = fl.bytes_left - goodput_bps * dt_s / 8.0
        fl.bytes_left = np.where(left > 1.0, left, 0.0)
        pending = np.bincount(
            fl.job[(fl.job >= 0) & fl.active & (fl.bytes_left > 0)], minlength=len(self.specs)
        )
        done = (self.phase == COMM) & (pending == 0)
        self.steps[done] += 1
        self.phase[done] = COMPUTE
        self.compute_left[done] = [self.specs[j].compute_s for j in np.flatnonzero(done)]
