"""What a gNMI target's leaves became, its mapping health, and the ``--explain`` report.

``TargetBook`` keeps, per target since the collector started: leaves received,
mapped to samples, deliberately unsupported (by named gap), unmapped (by
normalised path: keys and module prefixes dropped, instance names as ``*``),
bad values and bad encodings. Path tallies are bounded (``PathTally``): past
``limit`` distinct labels the rest are counted under ``(other paths)``.

A target is unhealthy when, since it was last subscribed, it sent leaves and
none mapped; or when the last ``unhealthy_after_leaves`` leaves in a row did not
map. The reason names the profile and the commonest unmapped path.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from fabricops.core.wording import counted

OTHER: Final = "(other paths)"


class LeafOutcome(Protocol):
    """The part of ``MappedNotification`` a book reads."""

    @property
    def leaves(self) -> int: ...
    @property
    def mapped(self) -> int: ...
    @property
    def bad_values(self) -> int: ...
    @property
    def bad_encodings(self) -> int: ...
    @property
    def unsupported(self) -> dict[str, int]: ...
    @property
    def unmapped_paths(self) -> dict[str, int]: ...


class PathTally:
    """Counts by label; at most ``limit`` labels, later new labels count as ``OTHER``."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}

    def add(self, label: str, n: int) -> str:
        """Count ``n`` under ``label`` (or ``OTHER`` when full); returns the label used."""
        if label not in self.counts and len(self.counts) >= self.limit:
            label = OTHER
        self.counts[label] = self.counts.get(label, 0) + n
        return label

    def top(self, n: int) -> list[tuple[str, int]]:
        return sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


@dataclass(frozen=True)
class TargetExplain:
    """One target's ``--explain`` entry."""

    device: str
    profile: str
    leaves: int
    mapped: int
    bad_values: int
    bad_encodings: int
    unsupported: Mapping[str, int]
    unmapped: Mapping[str, int]
    healthy: bool
    reason: str | None


class TargetBook:
    """The leaf accounting and mapping health of one target (see the module docstring)."""

    def __init__(self, device: str, profile: str, unhealthy_after_leaves: int = 10_000,
                 limit: int = 256) -> None:
        self.device = device
        self.profile = profile
        self.unhealthy_after_leaves = unhealthy_after_leaves
        self.leaves = self.mapped = self.bad_values = self.bad_encodings = 0
        self.unsupported = PathTally(limit)
        self.unmapped = PathTally(limit)
        self._since_subscribe = self._mapped_since_subscribe = self._run = 0

    def record(self, outcome: LeafOutcome) -> None:
        """Count one notification's leaves."""
        self.leaves += outcome.leaves
        self.mapped += outcome.mapped
        self.bad_values += outcome.bad_values
        self.bad_encodings += outcome.bad_encodings
        for label, n in outcome.unsupported.items():
            self.unsupported.add(label, n)
        for label, n in outcome.unmapped_paths.items():
            self.unmapped.add(label, n)
        self._since_subscribe += outcome.leaves
        self._mapped_since_subscribe += outcome.mapped
        self._run = 0 if outcome.mapped else self._run + outcome.leaves

    def subscribed(self) -> None:
        """A new subscription starts: health is judged afresh."""
        self._since_subscribe = self._mapped_since_subscribe = self._run = 0

    @property
    def reason(self) -> str | None:
        """Why the target is unhealthy, or None while it is healthy."""
        nothing = self._since_subscribe > 0 and self._mapped_since_subscribe == 0
        if not nothing and self._run < self.unhealthy_after_leaves:
            return None
        n = self._since_subscribe if nothing else self._run
        first = self.unmapped.top(1) or self.unsupported.top(1)
        example = f"; most often {first[0][0]}" if first else ""
        return (f"{self.device}: none of the last {n:,} leaf updates mapped to a metric "
                f"(profile {self.profile}){example}")

    def explain(self) -> TargetExplain:
        reason = self.reason
        return TargetExplain(self.device, self.profile, self.leaves, self.mapped,
                             self.bad_values, self.bad_encodings, dict(self.unsupported.counts),
                             dict(self.unmapped.counts), reason is None, reason)


def render_explain(targets: Sequence[TargetExplain], width: int = 80, top: int = 15) -> str:
    """The ``--explain`` report, ``width`` wide: one summary line per target (profile,
    leaves received, share mapped, deliberately unsupported, unmapped, bad), then, for
    each target with anything other than mapped leaves or that is unhealthy, its
    unsupported gaps and unmapped paths with counts and the reason."""
    if not targets:
        return "no gNMI target\n"
    name_w = max(6, min(24, max(len(t.device) for t in targets)))
    lines = [f"{'target':<{name_w}} {'profile':<12} {'leaves':>11} {'mapped':>7} "
             f"{'unsupp.':>8} {'unmapped':>9} {'bad':>5}"]
    attention = [t for t in targets if _needs_attention(t)]
    for t in targets:
        share = f"{100 * t.mapped / t.leaves:.1f}%" if t.leaves else "-"
        mark = "" if t.healthy else " DOWN"
        lines.append(_fit(f"{t.device[:name_w]:<{name_w}} {t.profile[:12]:<12} "
                          f"{t.leaves:>11,} {share:>7} {sum(t.unsupported.values()):>8,} "
                          f"{sum(t.unmapped.values()):>9,} "
                          f"{t.bad_values + t.bad_encodings:>5,}{mark}", width))
    healthy = sum(t.healthy for t in targets)
    lines.append(f"{counted(len(targets), 'target')}, {healthy:,} healthy; "
                 + (f"details of {len(attention):,} below" if attention else
                    "every leaf mapped"))
    for t in attention:
        share = f" ({100 * t.mapped / t.leaves:.1f} %)" if t.leaves else ""
        lines += ["",
                  f"{t.device}  profile {t.profile}  "
                  f"{'healthy' if t.healthy else 'UNHEALTHY'}",
                  f"  leaves received {t.leaves:>14,}",
                  f"  mapped          {t.mapped:>14,}{share}",
                  f"  unsupported     {sum(t.unsupported.values()):>14,}  (deliberately)",
                  *_rows(t.unsupported, width, top),
                  f"  unmapped        {sum(t.unmapped.values()):>14,}",
                  *_rows(t.unmapped, width, top),
                  f"  bad values {t.bad_values:,}, bad encodings {t.bad_encodings:,}"]
        if t.reason:
            lines += textwrap.wrap(f"reason: {t.reason}", width, initial_indent="  ",
                                   subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines) + "\n"


def _needs_attention(t: TargetExplain) -> bool:
    return (not t.healthy or bool(t.unmapped) or bool(t.unsupported)
            or t.bad_values + t.bad_encodings > 0)


def _rows(counts: Mapping[str, int], width: int, top: int) -> list[str]:
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    rows: list[str] = []
    for label, n in ranked[:top]:
        path, _, reason = label.partition(" (")  # a gap's name: "prefix (reason)"
        rows.append(_fit(f"    {n:>10,}  {path}", width))
        if reason:
            rows.append(_fit(f"                  ({reason}", width))
    if len(ranked) > top:
        rest = sum(n for _, n in ranked[top:])
        rows.append(f"    {rest:>10,}  ({len(ranked) - top} more)")
    return rows


def _fit(text: str, width: int) -> str:
    """``text`` cut in the middle with ``...`` to ``width`` characters."""
    if len(text) <= width:
        return text
    keep = width - 3
    return text[:keep // 2] + "..." + text[len(text) - (keep - keep // 2):]
