"""Set cover over a candidates x links incidence matrix (scipy CSR, 0/1 entries).

``greedy_cover`` is the classic greedy approximation (within ln(max path
length) + 1 of the optimum): repeatedly take the candidate that crosses the
most links not covered yet; ties go to the earliest candidate, so the result
is deterministic. Gains are kept in one array and decremented through the
column (link -> candidates) view when links become covered, so each step costs
one ``argmax`` over the candidates. ``drop_redundant`` then removes, latest
first, picks whose every link is also covered by another pick.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import csr_matrix

I64 = NDArray[np.int64]
B = NDArray[np.bool_]


def incidence(rows: list[list[int]], n_links: int) -> csr_matrix:
    """The 0/1 candidates x links matrix of link index lists (duplicates collapse)."""
    lengths = np.fromiter((len(r) for r in rows), np.int64, len(rows))
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    flat = np.fromiter((i for r in rows for i in r), np.int64, int(indptr[-1]))
    m = csr_matrix((np.ones(len(flat), np.int8), flat, indptr), shape=(len(rows), n_links))
    m.sum_duplicates()
    m.data[:] = 1
    return m


def greedy_cover(m: csr_matrix, target: B) -> list[int]:
    """Candidate rows that together cover every ``target`` column any row covers."""
    sub = csr_matrix(m[:, np.flatnonzero(target)])
    csc = sub.tocsc()
    gain = np.diff(sub.indptr).astype(np.int64)
    covered = np.zeros(sub.shape[1], bool)
    picks: list[int] = []
    while gain.size:
        best = int(np.argmax(gain))
        if gain[best] <= 0:
            break
        picks.append(best)
        cols = sub.indices[sub.indptr[best]:sub.indptr[best + 1]]
        new = cols[~covered[cols]]
        covered[new] = True
        rows = [csc.indices[csc.indptr[c]:csc.indptr[c + 1]] for c in new.tolist()]
        np.subtract.at(gain, np.concatenate(rows), 1)
    return picks


def drop_redundant(m: csr_matrix, target: B, picks: list[int]) -> list[int]:
    """``picks`` without those (tried latest first) whose target links others cover."""
    sub = csr_matrix(m[:, np.flatnonzero(target)])
    count = np.asarray(sub[picks].sum(axis=0)).ravel() if picks else np.zeros(0)
    kept = []
    for pick in reversed(picks):
        cols = sub.indices[sub.indptr[pick]:sub.indptr[pick + 1]]
        if len(cols) and (count[cols] >= 2).all():
            count[cols] -= 1
        else:
            kept.append(pick)
    return kept[::-1]


def first_cover_rank(m: csr_matrix, order: I64) -> I64:
    """Per link, how many candidates of ``order`` (a sequence of rows) are needed before
    one covers it; ``len(order) + 1`` if none does."""
    rank = np.full(m.shape[0], len(order), np.int64)
    rank[order] = np.arange(len(order))
    csc = m.tocsc()
    first = np.full(m.shape[1], len(order) + 1, np.int64)
    has = np.diff(csc.indptr) > 0
    if has.any():
        mins = np.minimum.reduceat(rank[csc.indices], csc.indptr[:-1][has])
        first[has] = np.where(mins < len(order), mins + 1, len(order) + 1)
    return first


def random_count_for_coverage(m: csr_matrix, target: B, usable: I64, coverage: float,
                              rng: np.random.Generator) -> float:
    """How many of the ``usable`` rows, taken in a random order, reach ``coverage`` (0..1)
    of the ``target`` columns; inf if all of them do not."""
    need = int(np.ceil(coverage * int(target.sum()) - 1e-9))
    if need <= 0:
        return 0.0
    first = np.sort(first_cover_rank(m, rng.permutation(usable))[target])
    if need > len(first) or first[need - 1] > len(usable):
        return float("inf")
    return float(first[need - 1])
