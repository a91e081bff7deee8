"""What discovery found, for people (lines of at most 80 columns) and scripts (JSON).

The text shows nodes and ports per tier, links per tier pair (and how many
were seen from both ends or one), port speeds, every kind of finding with its
count and its first examples, and the cabling differences when there are any.
Long lines wrap; nothing is cut.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import Any

from fabricops.core.topology import NodeRole, Topology
from fabricops.discover.cabling_diff import Difference
from fabricops.discover.model import Finding
from fabricops.discover.service import DiscoveryResult

WIDTH = 80
EXAMPLES = 3
_ORDER = [NodeRole.HOST, NodeRole.LEAF, NodeRole.AGG, NodeRole.SPINE, NodeRole.CORE,
          NodeRole.SWITCH]


def _wrap(text: str, indent: str) -> list[str]:
    """``text`` (already indented) over lines of at most WIDTH columns."""
    return textwrap.wrap(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False) or [""]


def speed_text(bps: int) -> str:
    """``400000000000`` -> ``400G``."""
    for unit, scale in (("T", 10**12), ("G", 10**9), ("M", 10**6)):
        if bps >= scale and bps % scale == 0:
            return f"{bps // scale}{unit}"
    return f"{bps}b/s"


def tier_counts(topo: Topology) -> dict[str, dict[str, int]]:
    """Role -> nodes and ports of that role."""
    out: dict[str, dict[str, int]] = {}
    for role in _ORDER:
        nodes = [n for n in topo.nodes if n.role is role]
        if nodes:
            out[role.value] = {"nodes": len(nodes), "ports": sum(len(n.ports) for n in nodes)}
    return out


def link_kinds(topo: Topology) -> dict[str, int]:
    """``host-leaf``, ``leaf-spine``, ... -> number of links."""
    roles = {n.id: n.role for n in topo.nodes}
    kinds: Counter[str] = Counter()
    for link in topo.links:
        pair = sorted((roles[link.a.partition(":")[0]], roles[link.b.partition(":")[0]]),
                      key=_ORDER.index)
        kinds["-".join(r.value for r in pair)] += 1
    order = {r.value: i for i, r in enumerate(_ORDER)}
    return dict(sorted(kinds.items(), key=lambda kv: [order[r] for r in kv[0].split("-")]))


def speeds(topo: Topology) -> dict[str, int]:
    """Link speed (the lower of its ends) -> number of links."""
    by_port = {p: port.speed_bps for p, (_, port) in topo.port_by_id.items()}
    count = Counter(speed_text(min(by_port[lk.a], by_port[lk.b])) for lk in topo.links)
    return dict(count)


def summary_lines(result: DiscoveryResult, diffs: list[Difference] | None = None) -> list[str]:
    topo, res = result.topology, result.resolution
    answered = sum(1 for r in result.reports if r.answered)
    lines = [f"Discovered {topo.name!r} from {answered} of {len(result.reports)} devices in "
             f"{result.elapsed_s:.1f} s",
             f"  {'tier':<8}{'nodes':>8}{'ports':>8}"]
    for role, c in tier_counts(topo).items():
        lines.append(f"  {role:<8}{c['nodes']:>8,}{c['ports']:>8,}")
    kinds = ", ".join(f"{k} {v:,}" for k, v in link_kinds(topo).items()) or "none"
    lines.append(f"  links {len(topo.links):,}: {kinds}")
    lines.append(f"  seen from both ends {res.confirmed:,}, from one end {res.one_sided:,}")
    lines.append("  speeds: " + (", ".join(f"{k} x {v:,}" for k, v in speeds(topo).items())
                                 or "none"))
    lines += finding_lines(result.findings)
    if diffs is not None:
        lines.append(f"Cabling differences: {len(diffs)}" if diffs else
                     "Cabling matches the intended topology")
        for d in diffs:
            lines += _wrap(f"  {d.text}", " " * 13)
    return [out for line in lines for out in _wrap(line, "    ")]


def finding_lines(findings: list[Finding]) -> list[str]:
    if not findings:
        return ["  unresolved: none"]
    lines = [f"  unresolved: {len(findings):,}"]
    by_kind: dict[str, list[Finding]] = {}
    for f in findings:
        by_kind.setdefault(f.kind.value, []).append(f)
    for kind, items in sorted(by_kind.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(items):>6,}  {kind}")
        for f in items[:EXAMPLES]:
            lines += _wrap(f"          {f.where}" + (f" ({f.detail})" if f.detail else ""),
                           " " * 12)
        if len(items) > EXAMPLES:
            lines.append(f"          ... and {len(items) - EXAMPLES:,} more")
    return lines


def summary_json(result: DiscoveryResult, out: str,
                 diffs: list[Difference] | None = None) -> dict[str, Any]:
    """The summary as one JSON document (every finding and difference listed)."""
    topo, res = result.topology, result.resolution
    return {
        "topology": out, "name": topo.name, "elapsed_s": round(result.elapsed_s, 3),
        "devices": {"polled": len(result.reports),
                    "answered": sum(1 for r in result.reports if r.answered)},
        "tiers": tier_counts(topo), "links": len(topo.links), "link_kinds": link_kinds(topo),
        "links_seen_from_both_ends": res.confirmed, "links_seen_from_one_end": res.one_sided,
        "speeds": speeds(topo), "names": result.names,
        "findings": [{"kind": f.kind.name.lower(), "where": f.where, "detail": f.detail}
                     for f in result.findings],
        "differences": None if diffs is None else [d.as_dict() for d in diffs],
    }
