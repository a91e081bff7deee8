"""RcaEngine: telemetry in, diagnoses out, one step at a time.

``ingest_frames`` / ``ingest_int`` fold decoded telemetry into the view;
``step(now_ns)`` derives signals, runs the detection rules and, while any
symptom is active, scores the candidates near a symptom (on a node a symptom
is on, or on the INT path of a flow that saw loss; a switch that stopped
reporting only itself; past ``context_rows`` a step, in turns: see ``focus``)
with the model (a link seen down or flapping at a switch
that stopped reporting but forwards is named by a rule, see ``blind``) and returns
one :class:`~fabricops.core.records.Diagnosis` per separate root that passes
the confidence floor (see ``roots``: concurrent faults each get their own, and
a flapping link is one diagnosis among others, not a blindfold). Missing
telemetry (a device or port gone quiet) is named in ``missing`` and scales the
confidence down; it never stops the analysis. An incident keeps its id while
its root stays on the same nodes (a NIC, then its link); a root elsewhere opens
a new incident, and an incident closes after ``clear_s`` without a diagnosis.
The engine sees only what the bus carries: frames, INT reports, and the
topology and job placement an operator supplies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from fabricops.core.frame import Frame
from fabricops.core.intreport import IntBatch
from fabricops.core.records import Diagnosis, Evidence, RankedEntity
from fabricops.core.topology import Topology
from fabricops.rca.blind import name_blind_links
from fabricops.rca.detect import (
    RuleConfig,
    Symptom,
    detect,
    set_aside_outage,
)
from fabricops.rca.evidence import ACTIONS, affected, evidence_for
from fabricops.rca.features import FEATURES, KIND_NAMES, Candidates, PathStats, features
from fabricops.rca.flow_paths import IntPaths
from fabricops.rca.focus import Focus
from fabricops.rca.hold import QUIET, candidate_activity, held
from fabricops.rca.model import CLASSES, RcaModel
from fabricops.rca.roots import RootGroup, alternatives, pick_roots, supported
from fabricops.rca.signals import PortSignals, Signals, missing_entities, unstable_nodes
from fabricops.rca.view import FabricView, PortIndex

F64 = npt.NDArray[np.float64]
STEADY = 0.02  # root-score margin within which an incident keeps its root
_OPTIC = CLASSES.index("optic_degradation")
_SWITCH_DOWN = CLASSES.index("switch_down")
FAN_IN_ALPHA = 0.05  # per step, of a NIC's usual fan-in towards what it sees


class RcaConfig(BaseModel):
    """Settings of the RCA engine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_confidence: float = Field(default=0.5, ge=0, le=1,
                                  description="Below this, no diagnosis is published")
    clear_s: float = Field(default=10.0, gt=0, description="Quiet time that closes an incident")
    hold_s: float = Field(default=120.0, ge=0,
                          description="How long an incident whose root carries no traffic "
                          "(so its symptoms cannot show) stays open on its last evidence; "
                          "0: it closes after clear_s like any other")
    stale_s: float = Field(default=3.5, gt=0, description=(
        "A port silent this long is missing; longer for a node that samples slowly "
        "or whose samples arrive late"))
    int_keep_s: float = Field(default=30.0, gt=0, description="How long an INT path counts")
    top_k: int = Field(default=5, ge=1, le=50, description="Ranked alternatives kept")
    max_roots: int = Field(default=4, ge=1, le=32, description="Separate roots per step")
    sure_roots: int = Field(default=128, ge=0, le=4096, description="Further roots per step "
                            "past max_roots, each with a symptom of its own that points at "
                            "its fault type and a root score of echo_floor or more: a mass "
                            "failure is named whole, not max_roots a step")
    echo_floor: float = Field(default=0.99, ge=0, le=1, description="Root score a candidate "
                              "needs to be a further root without a symptom of its own that "
                              "points at its fault type")
    optic_min_drop_db: float = Field(
        default=0.1, ge=0, description="A link is named for a degrading optic only once the "
        "receive power at one of its ends is this far below its baseline (readings wander "
        "by hundredths of a dB; draining a link for that would do harm)")
    blind_link_score: float = Field(default=0.9, ge=0, le=1, description="Root score of "
                                    "a link seen down or flapping from one end whose other "
                                    "end is a switch that stopped reporting but forwards "
                                    "(see fabricops.rca.blind); the missing penalty applies")
    context_rows: int = Field(default=4096, ge=1, description="Candidates a step scores "
                              "only because they are on a symptom's nodes (its context, "
                              "see fabricops.rca.focus); past this many, they are scored in "
                              "turns over the next steps (a row costs about 0.14 ms of CPU)")
    down_by_neighbours: float = Field(default=0.75, ge=0, le=1, description="A switch "
                                      "that this share of its neighbours' reporting ports "
                                      "facing it (two or more) see down is scored, not its "
                                      "links (see fabricops.rca.focus); 1: only all of them")
    missing_penalty: float = Field(default=0.1, ge=0, le=1,
                                   description="Confidence lost per missing device, up to half")
    warmup_steps: int = Field(default=10, ge=0,
                              description="Steps that only build baselines, after a start")
    score_near_symptoms: bool = Field(
        default=True, description="Score only candidates near a symptom (else every candidate "
        "with activity of its own: slower on a large busy fabric)")
    rules: RuleConfig = Field(default_factory=RuleConfig)


@dataclass
class StepResult:
    """One step: what was seen and concluded.

    ``x`` (the feature rows, or None when the step had nothing to score) is the
    engine's working matrix, filled again by its next step, unless the step was
    taken with ``keep_features``: then it is the caller's (for training)."""

    ts_ns: int
    signals: PortSignals
    symptoms: list[Symptom]
    x: F64 | None
    root_score: F64 | None
    best_type: npt.NDArray[np.int64] | None
    diagnosis: Diagnosis | None
    flows: list[tuple[int, int, tuple[int, ...]]]
    diagnoses: tuple[Diagnosis, ...] = ()  # every root of the step; ``diagnosis`` is the first
    outage_switches: int = 0  # switches whose silence was set aside as a collection outage
    context_deferred: int = 0  # context candidates left for later steps (``focus``)


class RcaEngine:
    """See the module docstring. Not thread-safe: one engine per consumer thread."""

    def __init__(self, topology: Topology, model: RcaModel | None,
                 config: RcaConfig | None = None,
                 jobs: Mapping[str, Sequence[str]] | None = None) -> None:
        self.config = config or RcaConfig()
        self.index = PortIndex(topology)
        self.candidates = Candidates.of(self.index)
        self.view = FabricView(self.index, stale_s=self.config.stale_s)
        self.paths = IntPaths(self.index, keep_s=self.config.int_keep_s)
        self.signals = Signals(self.index)
        self.model = model
        self.jobs = {k: tuple(v) for k, v in (jobs or {}).items()}
        self._incidents: dict[str, tuple[int, str, int, str]] = {}  # onset, root, seen, type
        self._fresh: dict[str, tuple[Diagnosis, int]] = {}  # incident -> latest, from evidence
        self.steps = 0
        self._cand_nodes = self.candidates.nodes(self.index)
        self._link_ends = self.candidates.link_ends(self.index)
        self._name_index = {name: i for i, name in enumerate(self.candidates.names)}
        self._focus = Focus(self._cand_nodes, self._link_ends, self.index.n_nodes,
                            self.candidates.n_switches, self.config.context_rows,
                            self.config.down_by_neighbours)
        self._fan_usual: F64 | None = None
        # the feature matrix steps fill (see StepResult), its pages touched now: the
        # first step with symptoms is the one whose time matters most
        self._work: F64 = np.empty((len(self.candidates), len(FEATURES)), order="F")
        self._work.fill(0.0)
        self._uplinks = np.bincount(self.index.port_node[self.signals.uplink],
                                    minlength=self.index.n_nodes).astype(float)

    @property
    def warming_up(self) -> bool:
        """The next step only builds baselines (``warmup_steps`` after a start): it names
        no symptom and scores nothing, so it is cheap."""
        return self.steps < self.config.warmup_steps

    def ingest_frames(self, frames: Iterable[Frame]) -> None:
        self.view.ingest(frames)

    def ingest_int(self, batch: IntBatch) -> None:
        self.paths.ingest(batch)

    def step(self, now_ns: int | None = None, *, keep_features: bool = False) -> StepResult:
        """Analyse the fabric as of ``now_ns`` (default: newest telemetry)."""
        snap = self.view.snapshot(now_ns)
        sig = self.signals.update(snap)
        flows = self.paths.recent(snap.ts_ns)
        agree, agree_n = self.paths.hash_agreement(self.signals.uplink)
        moved = self.paths.moves(snap.ts_ns, self.signals.uplink, unstable_nodes(self.index, sig))
        fan_in = self.paths.fan_in()
        stats = PathStats(flows, agree, agree_n, self._uplinks, fan_in, moved,
                          self._usual_fan_in(fan_in))
        symptoms, outage = set_aside_outage(
            detect(self.index, self.candidates, sig, stats, self.config.rules),
            len(self.index.switch_nodes), self.config.rules)
        if self.warming_up:
            symptoms = []
        self.steps += 1
        x = root = best = None
        diags: tuple[Diagnosis, ...] = ()
        clear_ns = self.config.clear_s * 1e9
        self._incidents = {k: v for k, v in self._incidents.items()
                           if snap.ts_ns - v[2] <= clear_ns}
        self._fresh = {k: v for k, v in self._fresh.items() if k in self._incidents}
        if symptoms or keep_features:
            # the working matrix is reused: a new 300k-row matrix each step at 100k GPUs
            # costs more in first touches of its pages than filling it
            x = features(self.index, self.candidates, sig, stats,
                         None if keep_features else self._work)
        if symptoms and self.model is not None and x is not None:
            downs = self._open_switch_downs()
            focus = (self._focus.pick(symptoms, x, [g.root for g in downs])
                     if self.config.score_near_symptoms else None)
            root, best = self.model.scores(x, self.candidates.kind, focus)
            name_blind_links(symptoms, x, self._link_ends, root, best,
                             self.config.blind_link_score)
            diags = self._diagnose(snap.ts_ns, sig, symptoms, root, best, flows, downs)
        diags += self._held(snap.ts_ns, sig, {d.id for d in diags})
        return StepResult(snap.ts_ns, sig, symptoms, x, root, best,
                          diags[0] if diags else None, flows, diags, outage,
                          self._focus.deferred if root is not None else 0)

    def _held(self, ts: int, sig: PortSignals, revised: set[str]) -> tuple[Diagnosis, ...]:
        """Open incidents not revised now whose root carries no traffic, republished
        (see :mod:`fabricops.rca.hold`) for up to ``hold_s`` after their last evidence;
        not a ``switch_down`` whose switch reports again: it is back, idle or not."""
        hold_ns = self.config.hold_s * 1e9
        quiet = [k for k in self._fresh if k not in revised
                 and ts - self._fresh[k][1] <= hold_ns]
        if not quiet:
            return ()
        activity = candidate_activity(self.index, sig)
        ix = self.index
        back = np.bincount(ix.port_node[~sig.node_missing], minlength=ix.n_nodes) > 0
        out = []
        for ident in quiet:
            onset, name, _, ftype = self._incidents[ident]
            i = self._name_index.get(name)
            if i is None or (ftype == "switch_down" and back[self._cand_nodes[i, 0]]):
                continue
            if activity[i] < QUIET:
                self._incidents[ident] = (onset, name, ts, ftype)
                latest, fresh_ns = self._fresh[ident]
                out.append(held(latest, ts, fresh_ns))
        return tuple(out)

    def _steady(self, group: RootGroup, root: F64, best: npt.NDArray[np.int64],
                taken: set[int]) -> int:
        """An open incident's current root when it is as likely as the group's root
        (within ``STEADY``), of the same type and on the same nodes (the NICs of a
        slow host): a revision does not hop between equals."""
        top = group.root
        for _, name, _, _ in self._incidents.values():
            cur = self._name_index.get(name)
            if (cur is not None and cur != top and cur not in taken
                    and best[cur] == best[top] and root[cur] >= root[top] - STEADY
                    and set(self._cand_nodes[cur].tolist()) & group.nodes):
                return cur
        return top

    def _incident_for(self, root_id: str, fault: str, ts: int,
                      used: set[str]) -> tuple[str, int]:
        """(id, onset) of the open incident this root continues, or of a new one: an
        incident continues on its own root (whatever its type now), or on a related
        root of another kind or of the same type."""
        kind = self.candidates.kind
        for ident, (onset, latest, _, ftype) in self._incidents.items():
            cur = self._name_index.get(latest)
            same = latest == root_id or ftype == fault or (
                cur is not None and kind[cur] != kind[self._name_index[root_id]])
            if ident not in used and same and related(latest, root_id):
                self._incidents[ident] = (onset, root_id, ts, fault)
                return ident, onset
        ident = f"dx-{ts}-{root_id}"
        self._incidents[ident] = (ts, root_id, ts, fault)
        return ident, ts

    def _diagnose(self, ts: int, sig: PortSignals, symptoms: list[Symptom], root: F64,
                  best: npt.NDArray[np.int64], flows: list[tuple[int, int, tuple[int, ...]]],
                  open_downs: list[RootGroup]) -> tuple[Diagnosis, ...]:
        cfg = self.config
        root = self._plausible(root, best, sig)
        sure = supported(symptoms, best)
        # a switch surely down is silent because it is down: its silence is the evidence
        # of its diagnosis, not a blind spot lowering every diagnosis's confidence
        down = {self.candidates.names[i] for i in sure
                if best[i] == _SWITCH_DOWN and root[i] >= cfg.echo_floor}
        missing = [m for m in missing_entities(self.index, sig) if not nodes_of(m) & down]
        scale = 1.0 - min(0.5, cfg.missing_penalty * len(missing))
        groups = pick_roots(root, self._cand_nodes, sure, floor=cfg.min_confidence / scale,
                            echo_floor=cfg.echo_floor, max_roots=cfg.max_roots,
                            kind=self.candidates.kind, fault=best, sure_roots=cfg.sure_roots,
                            open_roots=open_downs)
        taken = {g.root for g in groups}
        out: list[Diagnosis] = []
        used: set[str] = set()
        for g in groups:
            top = self._steady(g, root, best, taken)
            if top != g.root:  # the incident keeps its root; the new one is an alternative
                taken.discard(g.root)
                taken.add(top)
            g = RootGroup(top, g.nodes, g.kind, g.fault)
            order = alternatives(root, g, taken - {top}, self._cand_nodes, cfg.top_k)
            d = self._one(ts, sig, symptoms, root, best, flows, order, missing, scale, used)
            used.add(d.id)
            out.append(d)
        return tuple(out)

    def _open_switch_downs(self) -> list[RootGroup]:
        """The open ``switch_down`` incidents, as groups that absorb echoes."""
        out = []
        for _, name, _, ftype in self._incidents.values():
            i = self._name_index.get(name)
            if ftype == "switch_down" and i is not None:
                out.append(RootGroup(i, {int(n) for n in self._cand_nodes[i]},
                                     int(self.candidates.kind[i]), _SWITCH_DOWN))
        return out

    def _usual_fan_in(self, fan_in: F64) -> F64:
        """Per NIC: the fan-in it usually has (its collective's peers, steady background),
        as it was before this step; learnt slowly, and not from a NIC whose fan-in is now
        ``rules.fan_in`` or more above it (an incast must not become the usual)."""
        usual = self._fan_usual
        if usual is None or len(usual) != len(fan_in):
            usual = self._fan_usual = fan_in.copy()
            return usual.copy()
        before = usual.copy()
        learning = self.steps <= self.config.warmup_steps
        calm = learning | (fan_in - usual < self.config.rules.fan_in)
        usual[calm] += FAN_IN_ALPHA * (fan_in[calm] - usual[calm])
        if learning:  # flows are still being sampled for the first time
            np.maximum(usual, fan_in, out=usual)
        return before

    def _plausible(self, root: F64, best: npt.NDArray[np.int64], sig: PortSignals) -> F64:
        """Root scores, less those of links whose likeliest fault is a degrading optic
        while neither end's receive power is ``optic_min_drop_db`` below its baseline."""
        n = self.candidates.n_links
        optic = np.flatnonzero(best[:n] == _OPTIC)
        if optic.size == 0:
            return root
        drop = sig.rx_drop_db[self.index.link_ports[optic]].max(axis=1)
        weak = optic[drop < self.config.optic_min_drop_db]
        if weak.size == 0:
            return root
        out = root.copy()
        out[weak] = 0.0
        return out

    def _one(self, ts: int, sig: PortSignals, symptoms: list[Symptom], root: F64,
             best: npt.NDArray[np.int64], flows: list[tuple[int, int, tuple[int, ...]]],
             order: list[int], missing: list[str], scale: float, used: set[str]) -> Diagnosis:
        cand = self.candidates
        top = order[0]
        total = float(root[order].sum())
        root_id = cand.names[top]
        fault = CLASSES[int(best[top])]
        ident, onset = self._incident_for(root_id, fault, ts, used)
        ranked = tuple(
            RankedEntity(entity=cand.names[i], kind=KIND_NAMES[cand.kind[i]],
                         probability=round(float(root[i]) / max(total, 1.0), 4),
                         fault_type=CLASSES[int(best[i])])
            for i in order if root[i] > 0.01)
        ev: list[Evidence] = evidence_for(self.index, cand, top, sig, symptoms)
        gone = [Evidence(entity=m, signal="missing", value=1.0,
                         note="expected telemetry absent; confidence lowered") for m in missing]
        ev = ev[:4] + gone[:8] + ev[4:]
        hosts, jobs = affected(self.index, cand, top, flows, self.jobs)
        d = Diagnosis(
            id=ident, ts_ns=ts, onset_ns=onset, root=root_id,
            root_kind=KIND_NAMES[cand.kind[top]], fault_type=fault,
            confidence=round(float(root[top]) * scale, 4), ranked=ranked,
            evidence=tuple(ev[:16]), missing=tuple(missing), affected_hosts=hosts,
            affected_jobs=jobs, action=ACTIONS.get(fault, ""),
            model_version=self.model.version if self.model else "")
        self._fresh[ident] = (d, ts)
        return d


def nodes_of(entity: str) -> set[str]:
    """The nodes an entity is on: a node itself, a port's node, a link's two nodes."""
    return {part.split(":", 1)[0] for part in entity.split("~")}


def related(a: str, b: str) -> bool:
    """Two roots of one incident: they share a node (a NIC and its link, a switch and
    the links around it). An unrelated root is a new incident."""
    return bool(nodes_of(a) & nodes_of(b))
