"""Reading a NIC's files and ethtool statistics: the thin layer over the file system.

``NicFiles`` knows where one RDMA port's values live below the root:
``sys/class/infiniband/<dev>/ports/<n>/{counters,hw_counters,state,rate}``
(bnxt_re may keep ``hw_counters`` on the device), and
``sys/class/net/<if>/{operstate,speed,carrier_changes,statistics/}``.

An ``EthtoolSource`` gives an interface's ``ethtool -S`` statistics and its
``ethtool -m`` module text. ``RecordedEthtool`` reads them from the tree
(path convention: ``<root>/ethtool/<if>/statistics`` holds the output of
``ethtool -S <if>``, ``<root>/ethtool/<if>/module`` that of ``ethtool -m
<if>``); ``LiveEthtool`` asks the kernel through pyroute2's ethtool ioctl
(``ETHTOOL_GSTATS``), falling back to running ``ethtool -S``, and runs
``ethtool -m`` for optics when that program is installed.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Protocol

from fabricops.agent.discovery import INFINIBAND, NET, RdmaPort
from fabricops.agent.ethtool_text import Statistics, parse_statistics
from fabricops.agent.names import SourceName
from fabricops.agent.values import Problem, Reason, parse_counter

ETHTOOL_DIR: Final = Path("ethtool")
LLDP_FILE: Final = Path("lldp/neighbors.json")
COMMAND_TIMEOUT_S: Final = 5.0


def read_text(path: Path) -> str | Problem | None:
    """A small file's text; None if it does not exist; a Problem if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="strict")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        return Problem(str(path), Reason.GARBAGE, f"not UTF-8 text: {exc.reason}")
    except OSError as exc:
        return Problem(str(path), Reason.UNREADABLE, exc.strerror or str(exc))


def read_counter(path: Path) -> int | Problem:
    text = read_text(path)
    return text if isinstance(text, Problem) else parse_counter(text, str(path))


def _listing(directory: Path) -> frozenset[str]:
    try:
        return frozenset(p.name for p in directory.iterdir() if p.is_file())
    except OSError:
        return frozenset()


class NicFiles:
    """Paths of one RDMA port's values below ``root`` (see the module docstring)."""

    def __init__(self, root: Path, port: RdmaPort) -> None:
        dev = root / INFINIBAND / port.device
        self.port_dir = dev / "ports" / str(port.port)
        self.dirs: dict[SourceName, Path] = {"ib": self.port_dir / "counters",
                                             "hw": self.port_dir / "hw_counters"}
        if not self.dirs["hw"].is_dir() and (dev / "hw_counters").is_dir():
            self.dirs["hw"] = dev / "hw_counters"
        self.net_dir = root / NET / port.netdev if port.netdev else None
        if self.net_dir is not None:
            self.dirs["net"] = self.net_dir / "statistics"
            self.dirs["link"] = self.net_dir

    def names(self) -> dict[SourceName, frozenset[str]]:
        """The counter names each file source offers now."""
        out: dict[SourceName, frozenset[str]] = {
            source: _listing(d) for source, d in self.dirs.items() if source != "link"}
        if self.net_dir is not None and (self.net_dir / "carrier_changes").is_file():
            out["link"] = frozenset({"carrier_changes"})
        return out

    def read(self, source: SourceName, names: Iterable[str]) -> dict[str, int | Problem]:
        """Each named counter file of ``source``, parsed."""
        d = self.dirs.get(source)
        if d is None:
            return {n: Problem(f"{source}:{n}", Reason.MISSING, "no interface") for n in names}
        return {n: read_counter(d / n) for n in names}


class EthtoolSource(Protocol):
    """An interface's ethtool statistics and transceiver module text."""

    def statistics(self, ifname: str) -> Statistics: ...

    def module(self, ifname: str) -> str | None: ...


class RecordedEthtool:
    """``ethtool -S`` and ``ethtool -m`` outputs recorded in the tree below ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _text(self, ifname: str, kind: str) -> tuple[str | None, list[Problem]]:
        path = self.root / ETHTOOL_DIR / ifname / kind
        text = read_text(path)
        if isinstance(text, Problem):
            return None, [text]
        return text, []

    def statistics(self, ifname: str) -> Statistics:
        path = self.root / ETHTOOL_DIR / ifname / "statistics"
        text, problems = self._text(ifname, "statistics")
        if problems:
            return Statistics(problems=problems)
        return parse_statistics(text, str(path))

    def module(self, ifname: str) -> str | None:
        return self._text(ifname, "module")[0]


class LiveEthtool:
    """The running kernel's ethtool statistics (pyroute2 ioctl, else ``ethtool -S``)."""

    def __init__(self) -> None:
        self.ethtool_program = shutil.which("ethtool")

    def statistics(self, ifname: str) -> Statistics:
        try:
            from pyroute2.ethtool.ioctl import IoctlEthtool  # type: ignore[import-untyped]
            ioctl = IoctlEthtool(ifname)
            try:
                pairs = ioctl.get_statistics()
            finally:
                ioctl.close()
            return Statistics(values={str(k): int(v) for k, v in pairs})
        except Exception as exc:  # no such device, no permission, driver without stats
            if self.ethtool_program is None:
                return Statistics(problems=[Problem(f"ethtool -S {ifname}", Reason.UNREADABLE,
                                                    str(exc) or type(exc).__name__)])
        return parse_statistics(self._run("-S", ifname), f"ethtool -S {ifname}")

    def module(self, ifname: str) -> str | None:
        return self._run("-m", ifname) if self.ethtool_program else None

    def _run(self, flag: str, ifname: str) -> str | None:
        if self.ethtool_program is None:
            return None
        try:
            done = subprocess.run([self.ethtool_program, flag, ifname], capture_output=True,
                                  text=True, timeout=COMMAND_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None


def lldp_text(root: Path, live: bool) -> str | Problem | None:
    """lldpd's neighbour table: recorded at ``<root>/lldp/neighbors.json``, or live from
    ``lldpcli -f json show neighbors`` (None when lldpd is not installed or not running)."""
    if not live:
        return read_text(root / LLDP_FILE)
    program = shutil.which("lldpcli")
    if program is None:
        return None
    try:
        done = subprocess.run([program, "-f", "json", "show", "neighbors"], capture_output=True,
                              text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Problem("lldpcli", Reason.UNREADABLE, str(exc))
    if done.returncode != 0:
        return Problem("lldpcli", Reason.UNREADABLE, done.stderr.strip()[:200])
    return done.stdout
