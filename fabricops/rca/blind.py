"""A link seen down or flapping from one end while the switch at its other end is blind.

A switch can stop reporting and go on forwarding: its gNMI session or agent
died, its management network is cut. Its neighbours still report, and they see
their links to it up, except one: that link is down, and only its reporting
end can say so. The model cannot tell: on every link it learnt from, a silent
end was a dead device (a NIC, a switch down), and such a link is that device's
echo, not a root. So the engine does not ask it (``focus.Focus`` scores
no link of a silent switch), and this rule names the link instead.

``blind_links`` picks the links with an ``oper_down`` symptom, or a
``carrier_transitions`` one of more than one recent transition (``ONE_DOWN``:
a link that went down once is down, not flapping), whose other end is a switch
that stopped reporting while fewer than ``alive_below`` of its neighbours'
reporting ports facing it see their link down (feature ``s_nbr_down``): it
forwards, so its silence is not why the link is down. A switch that is down
has every reporting neighbour see it down, and a silent switch none of whose
neighbours report tells nothing (no link of it has a symptom). A switch
booting again after ``switch_down`` flaps its links while still silent: its
open incident absorbs them (``roots``). ``name_blind_links`` gives those links
``score`` as root score (never lowering the model's) and the type
``link_flap`` when they flap, else ``link_down``. The engine's
missing-telemetry penalty then counts the blind switch, as for any diagnosis
made without part of the fabric.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

from fabricops.rca.detect import FLAPPING, OPER_DOWN, STOPPED, Symptom
from fabricops.rca.features import FCOL
from fabricops.rca.model import CLASSES

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
LINK_DOWN: Final = CLASSES.index("link_down")
LINK_FLAP: Final = CLASSES.index("link_flap")
ONE_DOWN: Final = 1.0  # recent carrier transitions (``PortSignals.flaps``) of one change
NBR_DOWN: Final = FCOL["s_nbr_down"]


def blind_links(symptoms: list[Symptom], x: F64, link_ends: I64,
                alive_below: float = 0.5) -> tuple[I64, I64]:
    """Links (candidate indices) seen down or flapping by one end whose other end is a
    switch that stopped reporting but forwards, by its neighbours' account, and the type
    each is named (module docstring). ``link_ends`` is links x 4
    (``Candidates.link_ends``); ``x`` the step's features."""
    stopped = np.array([s.candidate for s in symptoms if s.rule == STOPPED], np.int64)
    seen = {s.candidate: LINK_DOWN for s in symptoms if s.rule == OPER_DOWN}
    seen.update((s.candidate, LINK_FLAP) for s in symptoms
                if s.rule == FLAPPING and s.value > ONE_DOWN)
    links = np.array([c for c in seen if c < len(link_ends)], np.int64)
    if stopped.size == 0 or links.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    alive = stopped[x[stopped, NBR_DOWN] < alive_below]
    links = links[np.isin(link_ends[links, :2], alive).any(axis=1)]
    types = np.array([seen[c] for c in links.tolist()], np.int64)
    return links, types


def name_blind_links(symptoms: list[Symptom], x: F64, link_ends: I64, root: F64,
                     best: I64, score: float) -> None:
    """Raise the links of ``blind_links`` whose root score is below ``score`` to it,
    with their type, in place (a higher score the model gave stays, with its type)."""
    links, types = blind_links(symptoms, x, link_ends)
    low = root[links] < score
    root[links[low]] = score
    best[links[low]] = types[low]
