"""A link seen down from one end while the switch at its other end is blind.

A switch can stop reporting and go on forwarding: its gNMI session or agent
died, its management network is cut. Its neighbours still report, and they see
their links to it up, except one: that link is down, and only its reporting
end can say so. The model cannot tell: on every link it learnt from, a silent
end was a dead device (a NIC, a switch down), and such a link is that device's
echo, not a root. So the engine does not ask it (``RcaEngine._focus`` scores
no link of a silent switch), and this rule names the link instead.

``blind_link_downs`` picks the links with an ``oper_down`` symptom whose other
end is a switch that stopped reporting while fewer than ``alive_below`` of its
neighbours' reporting ports facing it see their link down (feature
``s_nbr_down``): it forwards, so its silence is not why the link is down. A
switch that is down has every reporting neighbour see it down, and a silent
switch none of whose neighbours report tells nothing (no link of it has a
symptom). ``name_blind_link_downs`` gives those links ``score`` as root score
(never lowering the model's) and the type ``link_down``. The engine's
missing-telemetry penalty then counts the blind switch, as for any diagnosis
made without part of the fabric.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.rca.detect import STOPPED, Symptom
from fabricops.rca.features import FCOL
from fabricops.rca.model import CLASSES

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
LINK_DOWN: Final = CLASSES.index("link_down")
NBR_DOWN: Final = FCOL["s_nbr_down"]


def blind_link_downs(symptoms: list[Symptom], x: F64, link_ends: I64,
                     alive_below: float = 0.5) -> I64:
    """Links (candidate indices) seen down by one end whose other end is a switch that
    stopped reporting but forwards, by its neighbours' account (module docstring).
    ``link_ends`` is links x 4 (``Candidates.link_ends``); ``x`` the step's features."""
    stopped = np.array([s.candidate for s in symptoms if s.rule == STOPPED], np.int64)
    down = np.unique(np.array([s.candidate for s in symptoms if s.rule == "oper_down"],
                              np.int64))
    if stopped.size == 0 or down.size == 0:
        return np.zeros(0, np.int64)
    alive = stopped[x[stopped, NBR_DOWN] < alive_below]
    down = down[down < len(link_ends)]
    blind = np.isin(link_ends[down, :2], alive).any(axis=1)
    out: I64 = down[blind]
    return out


def name_blind_link_downs(symptoms: list[Symptom], x: F64, link_ends: I64, root: F64,
                          best: I64, score: float) -> None:
    """Raise the links of ``blind_link_downs`` whose root score is below ``score`` to it,
    with the type ``link_down``, in place (a higher score the model gave stays, with its
    type)."""
    links = blind_link_downs(symptoms, x, link_ends)
    low = links[root[links] < score]
    root[low] = score
    best[low] = LINK_DOWN
