"""Several roots at once: which scored candidates are separate faults, which are echoes.

``pick_roots`` walks the candidates from the highest root score down. A
candidate on a node that an already chosen root is on belongs to that root's
group (it is one of its alternatives, never a root of its own) when it is of
another kind (a NIC and its link, a switch and the links around it) or would
have the same fault type (two links of one PFC cycle, the NICs of one slow
host). Two links of one switch with different faults (one flaps, the other
loses packets) are separate roots. The
best candidate above ``floor`` opens the first group; any other opens a group
of its own when a symptom of its own supports it (``supported``: a rule that
fired on it and points at its fault type), or, when it only inherits its score
from what is around it, when it reaches ``echo_floor``. Groups come out in the
order they were opened (the first is the most likely root of the step), at
most ``max_roots`` of them; past those, up to ``sure_roots`` more, each *sure*:
supported, and at ``echo_floor`` or above (a row of switches losing power is
named whole, not ``max_roots`` a step). ``open_roots`` are groups of incidents
still open that absorb echoes the same way without being picked again (the
links of a switch back from ``switch_down`` flap as it boots: its incident, not
new faults); a candidate is never its own echo.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fabricops.rca.detect import Symptom
from fabricops.rca.model import CLASSES

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


@dataclass
class RootGroup:
    """One fault: its root candidate, its kind and fault type, and the nodes it covers."""

    root: int
    nodes: set[int] = field(default_factory=set)
    kind: int = 0
    fault: int = 0

    def absorbs(self, nodes: set[int], kind: int, fault: int) -> bool:
        """A candidate on these nodes, of this kind and type, is an echo of this root."""
        return bool(nodes & self.nodes) and (kind != self.kind or fault == self.fault)


def pick_roots(root: F64, cand_nodes: I64, supported: Collection[int], *, floor: float,
               echo_floor: float, max_roots: int, kind: npt.NDArray[np.int8] | None = None,
               fault: I64 | None = None, sure_roots: int = 0,
               open_roots: Collection[RootGroup] = ()) -> list[RootGroup]:
    """See the module docstring. ``cand_nodes`` is candidates x 2 (``Candidates.nodes``);
    ``kind`` and ``fault`` (per candidate: its kind and most likely type) default to one
    kind and one type, so that any shared node makes an echo."""
    groups: list[RootGroup] = []
    on_node: dict[int, list[RootGroup]] = {}  # the groups on each node: echoes found in O(1)
    for group in open_roots:
        for n in group.nodes:
            on_node.setdefault(n, []).append(group)
    above = np.flatnonzero(root >= floor)
    for i in above[np.argsort(-root[above], kind="stable")].tolist():
        nodes = {int(n) for n in cand_nodes[i]}
        k = int(kind[i]) if kind is not None else 0
        f = int(fault[i]) if fault is not None else 0
        if any(g.root != i and g.absorbs(nodes, k, f)
               for n in nodes for g in on_node.get(n, ())):
            continue
        sure = i in supported and root[i] >= echo_floor
        if groups and i not in supported and root[i] < echo_floor:
            continue
        if len(groups) >= max_roots and not sure:
            continue
        group = RootGroup(i, nodes, k, f)
        groups.append(group)
        for n in nodes:
            on_node.setdefault(n, []).append(group)
        if len(groups) >= max_roots + sure_roots:
            break
    return groups


def alternatives(root: F64, group: RootGroup, others: Collection[int], cand_nodes: I64,
                 k: int) -> list[int]:
    """The group's root, then up to ``k - 1`` alternatives: candidates on the group's nodes
    first (the usual confusion is a neighbour of the root), then the rest by score;
    never another group's root."""
    live = np.flatnonzero(root > 0.01)
    live = live[np.argsort(-root[live], kind="stable")]
    near = np.isin(cand_nodes[live], list(group.nodes)).any(axis=1)
    skip = set(others) | {group.root}
    ranked = [group.root]
    for i in [*live[near].tolist(), *live[~near].tolist()]:
        if i not in skip:
            ranked.append(int(i))
            if len(ranked) >= k:
                break
    return ranked


def supported(symptoms: list[Symptom], best: npt.NDArray[np.int64]) -> set[int]:
    """Candidates with a symptom of their own that points at the type the model gives
    them (a slow host's NICs pause: the pausing rule supports a slow receiver)."""
    out = set()
    for s in symptoms:
        ftype = CLASSES[int(best[s.candidate])]
        if s.fault_type == ftype or (ftype, s.fault_type) in _ALSO:
            out.add(s.candidate)
    return out


_ALSO = {("slow_receiver", "pfc_storm"), ("link_down", "link_flap"), ("link_flap", "link_down"),
         ("optic_degradation", "gray_loss"), ("gray_loss", "optic_degradation"),
         ("nic_down", "link_down")}
