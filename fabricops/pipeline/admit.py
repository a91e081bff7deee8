"""What of a decoded record the pipeline keeps: samples it can judge and store.

``admit_samples`` drops from a frame the samples of metrics the catalogue
does not know and the samples that are no plausible reading of their metric
(``Catalogue.out_of_range``: a NaN gauge, a state outside its enumeration, an
optic reading past physical limits); the rest of the frame is kept. Each
drop is reported with its reason, its count and a readable detail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricops.core.catalogue import CATALOGUE, Catalogue
from fabricops.core.frame import Frame


@dataclass(frozen=True)
class Dropped:
    """Samples of one frame set aside for one reason."""

    reason: str
    count: int
    detail: str


def admit_samples(frame: Frame, catalogue: Catalogue = CATALOGUE) -> tuple[Frame, list[Dropped]]:
    """``frame`` without the samples it cannot keep, and what was dropped (see module)."""
    known = catalogue.is_known
    ids = frame.metric.astype(np.int64)
    unknown = ~((ids < len(known)) & known[np.minimum(ids, len(known) - 1)])
    implausible = ~unknown & frame.out_of_range(catalogue)
    dropped = []
    if unknown.any():
        bad = sorted(set(frame.metric[unknown].tolist()))
        dropped.append(Dropped("unknown_metric", int(unknown.sum()),
                               f"frame of {frame.device}: metric ids {bad} are not in the "
                               f"catalogue; {int(unknown.sum())} samples dropped"))
    if implausible.any():
        i = int(np.flatnonzero(implausible)[0])
        name = catalogue.by_id(int(frame.metric[i])).name
        value = frame.values(catalogue)[i]
        dropped.append(Dropped("out_of_range", int(implausible.sum()),
                               f"frame of {frame.device}: {name} of "
                               f"{frame.entities[frame.entity_idx[i]]} = {value!r} is no "
                               f"plausible reading; {int(implausible.sum())} samples dropped"))
    if not dropped:
        return frame, []
    keep = ~(unknown | implausible)
    return Frame(frame.device, frame.ts_ns, frame.source, frame.seq, frame.entities,
                 frame.entity_idx[keep], frame.metric[keep], frame.raw[keep]), dropped
