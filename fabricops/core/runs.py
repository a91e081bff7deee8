"""An index array that is one run of consecutive numbers, as a slice.

Indexing with a slice gives a view (no gather, and writes land in place);
indexing with the array gives a copy. Arrays of fabric ports are often such
runs: a device's ports, every switch port, a round of whole devices.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def run_of(index: npt.NDArray[np.int64]) -> slice | None:
    """``index`` as a slice when it is consecutive ascending numbers, else None."""
    n = len(index)
    if n == 0 or int(index[-1]) - int(index[0]) != n - 1 or not (np.diff(index) == 1).all():
        return None
    return slice(int(index[0]), int(index[0]) + n)
