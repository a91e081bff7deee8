"""Many blocks encoded at once: the same bytes as one at a time, in fewer array passes.

A window's block is small (a host's few dozen series of a minute's points):
encoding one alone takes about a hundred array calls, each costing more to make
than its few thousand values cost to process. Two of the encoder's steps work on each
series alone (or each entity's series), whatever else is in the block: the
choice of residual modes (``keyframe_modes.choose_residuals``) and of counter
references (``keyframe_refs.choose``). The section writers are generators that
*yield* those steps as requests (``ModeChoice``, ``RefChoice``) and go on with
the answer sent back. ``settle_all`` runs every block's writer to its next
request, serves the requests of one key (kind and number of points) together,
up to ``BATCH_VALUES`` values a call, over their stacked series, and sends each
block its own rows of the answer. ``settle`` runs one writer alone.

A request type has ``key`` (requests of one key can be stacked), ``size`` (its
values) and a static ``serve(requests) -> answers`` that gives each request what
serving it alone gives.
"""

from __future__ import annotations

from collections.abc import Generator, Hashable, Sequence
from typing import Any, Final, Protocol, TypeVar

BATCH_VALUES: Final = 1 << 17
"""Values served in one call at most (1 MB of uint64: the stacked passes stay within
a core's cache, which a larger stack falls out of)."""

T = TypeVar("T")


class Request(Protocol):
    """What a writer yields (see the module docstring)."""

    @property
    def key(self) -> Hashable:
        """Requests of one key can be served together."""

    @property
    def size(self) -> int:
        """Values the request stacks."""

    @staticmethod
    def serve(requests: list[Any]) -> list[Any]:
        """Per request (of one key), what serving it alone gives."""


Work = Generator[Request, Any, T]
"""A writer: yields requests, is sent their answers, returns its result."""


def settle(work: Work[T]) -> T:
    """Run one writer, serving each of its requests alone."""
    return settle_all([work])[0]


def settle_all(works: Sequence[Work[T]]) -> list[T]:
    """Run every writer to its end, serving their requests of one key together; each
    writer's result, in order. An exception raised by a writer ends them all."""
    done: dict[int, T] = {}
    answers: dict[int, Any] = dict.fromkeys(range(len(works)))
    live = list(range(len(works)))
    while live:
        asked: dict[Hashable, list[tuple[int, Request]]] = {}
        for i in live:
            try:
                request = works[i].send(answers[i])
            except StopIteration as stop:
                done[i] = stop.value
                continue
            asked.setdefault(request.key, []).append((i, request))
        live = []
        for group in asked.values():
            for chunk in _chunks(group):
                served = chunk[0][1].serve([r for _, r in chunk])
                for (i, _), answer in zip(chunk, served, strict=True):
                    answers[i] = answer
                    live.append(i)
    return [done[i] for i in range(len(works))]


def _chunks(group: list[tuple[int, Request]]) -> list[list[tuple[int, Request]]]:
    """The group in runs of at most ``BATCH_VALUES`` values (at least one request each)."""
    out: list[list[tuple[int, Request]]] = []
    values = 0
    for item in group:
        if not out or values + item[1].size > BATCH_VALUES:
            out.append([])
            values = 0
        out[-1].append(item)
        values += item[1].size
    return out
