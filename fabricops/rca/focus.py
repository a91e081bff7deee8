"""Which candidates a step scores: those near a symptom, not the whole fabric.

``Focus.pick`` chooses them:

- every symptom's own candidate, and the links voted for by flows that saw
  loss (INT paths);
- a symptom of ``OWN_ENDS`` brings only that and, for a link, the switches and
  NICs at its ends. A switch that stopped reporting: its silence says nothing
  of its links and NICs, and if it is down, the link-down symptoms of its
  peers bring them (a hundred candidates a switch, when many fall silent at
  once). A link that is down or flaps: its root is the link or what is at an
  end, unless that end is a switch that stopped reporting or has an open
  ``switch_down`` incident: then the link's state is that switch's (down, or
  booting again), and only the switch is scored (12,800 links when 100
  switches of a 100k-GPU fabric go down). The same holds, before its silence
  shows, for a switch that at least ``down_by_neighbours`` of its neighbours'
  reporting ports facing it (two or more) see down: it is scored, its links
  are not;
- any other symptom brings every candidate on the nodes its candidate is on
  (a NIC's retransmissions: its host and its switch, and so the switch's
  links and NICs): its *context*. Past ``context_rows`` such candidates in a
  step, they are scored in turns, ``context_rows`` a step in candidate order
  from where the last step stopped. When switches go down, every NIC whose
  flows crossed them retransmits, and their context is the whole fabric
  (46,000 rows at 16k GPUs, 6-7 s of the classifier's CPU time in one step);
  in turns, each step stays short and every context candidate is still
  scored within a few steps while the symptoms last.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import numpy.typing as npt

from fabricops.rca.detect import OWN_ENDS, STOPPED, Symptom
from fabricops.rca.features import FCOL

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
VOTES = FCOL["l_vote_share"]
NBR_DOWN, NBR_DOWN_N = FCOL["s_nbr_down"], FCOL["s_nbr_down_n"]


class Focus:
    """See the module docstring. ``cand_nodes`` and ``link_ends`` are
    ``Candidates.nodes`` and ``Candidates.link_ends``. Keeps whose turn it is between
    steps; ``deferred`` is how many context candidates the last pick left for later."""

    def __init__(self, cand_nodes: I64, link_ends: I64, n_nodes: int, n_switches: int,
                 context_rows: int, down_by_neighbours: float = 0.75) -> None:
        self.cand_nodes = cand_nodes
        self.link_ends = link_ends
        self.n_nodes = n_nodes
        self.switches = slice(len(link_ends), len(link_ends) + n_switches)
        self.context_rows = context_rows
        self.down_by_neighbours = down_by_neighbours
        self.deferred = 0
        self._next = 0  # the first candidate of the next turn

    def pick(self, symptoms: list[Symptom], x: F64, gone_switches: Collection[int] = ()) -> B:
        """Candidates to score this step; ``gone_switches``: switch candidates with an
        open ``switch_down`` incident."""
        n_links = len(self.link_ends)
        others = [s.candidate for s in symptoms if s.rule not in OWN_ENDS]
        near = np.zeros(self.n_nodes, bool)
        near[self.cand_nodes[others].ravel()] = True
        context: B = np.any(near[self.cand_nodes], axis=1)
        out = np.zeros(len(context), bool)
        out[others] = True
        own = np.array([s.candidate for s in symptoms if s.rule in OWN_ENDS], np.int64)
        gone = np.zeros(len(out) + 1, bool)  # the last is False: no switch (-1) at an end
        gone[[s.candidate for s in symptoms if s.rule == STOPPED]] = True
        gone[list(gone_switches)] = True
        sw = x[self.switches]
        seen_down = n_links + np.flatnonzero((sw[:, NBR_DOWN] >= self.down_by_neighbours)
                                             & (sw[:, NBR_DOWN_N] >= 2))
        gone[seen_down] = True
        out[seen_down] = True
        links = own[own < n_links]
        links = links[~gone[self.link_ends[links, :2]].any(axis=1)]
        out[own[own >= n_links]] = True
        out[links] = True
        ends = self.link_ends[links].ravel()
        out[ends[ends >= 0]] = True
        out[:n_links] |= x[:n_links, VOTES] > 0
        out[self._in_turn(np.flatnonzero(context & ~out))] = True
        return out

    def _in_turn(self, context: I64) -> I64:
        """The context candidates (sorted) scored now: all of them, or ``context_rows``
        from where the last turn stopped, wrapping round."""
        self.deferred = max(0, len(context) - self.context_rows)
        if not self.deferred:
            return context
        start = int(np.searchsorted(context, self._next))
        turn = np.roll(context, -start)[:self.context_rows]
        self._next = int(turn[-1]) + 1
        return turn
