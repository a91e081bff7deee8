"""Drift: a periodic read of the running settings, compared with the intent.

``DriftWatch`` reads every device's settings each ``interval_s`` (through a
``SettingsReader``) and, per setting that leaves its intended value, publishes one
``Event`` (kind ``state_change``, metric ``config.<setting>``, on the port or the
device) and, per drifted device, one ``Diagnosis`` of type ``config_drift`` rooted at
the device: its evidence names every drifted setting with the value found and the
intended one, and its action says to restore them (remediation's ``restore_config``
carries that out). A setting back at its intent publishes a ``cleared`` event.
``check_once`` is the same pass, called directly (tests, ``fabricops config drift
--once``). A device that cannot be read is counted, never taken as drift.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field

from fabricops.config.apply import SettingsReader
from fabricops.config.running import Settings
from fabricops.core.records import Diagnosis, Event, EventKind, Evidence, Severity
from fabricops.core.roce_settings import SettingValue, split_key

log = logging.getLogger(__name__)
DRIFT = "config_drift"


class DriftConfig(BaseModel):
    """How often the running configuration is compared with the intent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interval_s: float = Field(60.0, gt=0, description="Seconds between two reads")


@dataclass
class DriftResult:
    """One pass: events raised, diagnoses, devices not read."""

    events: list[Event] = field(default_factory=list)
    diagnoses: list[Diagnosis] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)


def _number(value: SettingValue | None) -> float:
    if isinstance(value, bool | int):
        return float(value)
    return float(len(str(value).split(","))) if value else 0.0


def _entity(device: str, key: str) -> str:
    interface, _ = split_key(key)
    return device if interface is None else f"{device}:{interface}"


def drift_diagnosis(device: str, drifted: Mapping[str, tuple[SettingValue | None,
                                                              SettingValue]],
                    ts_ns: int) -> Diagnosis:
    """The ``config_drift`` diagnosis of ``device``: key -> (found, intended)."""
    digest = hashlib.blake2b(f"{device}|{sorted(drifted)}".encode(), digest_size=6).hexdigest()
    evidence = tuple(Evidence(entity=_entity(device, k), signal=f"setting {k}"[:200],
                              value=_number(found), note=f"found {found!r}, intent {want!r}")
                     for k, (found, want) in sorted(drifted.items()))
    leaves = sorted({split_key(k)[1] for k in drifted})
    return Diagnosis(id=f"drift-{digest}", ts_ns=ts_ns, onset_ns=ts_ns, root=device,
                     root_kind="switch", fault_type=DRIFT, confidence=1.0,
                     evidence=evidence[:64],
                     action=f"restore {', '.join(leaves)} on {device} to intent "
                            f"({len(drifted)} setting(s))")


class DriftWatch:
    """See the module docstring. ``publish`` receives each pass's result."""

    def __init__(self, config: DriftConfig, intended: Mapping[str, Settings],
                 read: SettingsReader, publish: Callable[[DriftResult], None],
                 clock_ns: Callable[[], int], registry: CollectorRegistry | None = None
                 ) -> None:
        self.config = config
        self.intended = {d: dict(v) for d, v in intended.items()}
        self.read = read
        self.publish = publish
        self.clock_ns = clock_ns
        self._drifted: dict[str, dict[str, tuple[SettingValue | None, SettingValue]]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        reg = registry if registry is not None else CollectorRegistry()
        self.m_passes = Counter("fabricops_config_drift_passes", "Drift checks run",
                                registry=reg)
        self.m_drifted = Gauge("fabricops_config_drifted_settings",
                               "Settings away from their intent at the last pass", registry=reg)
        self.m_unread = Gauge("fabricops_config_unread_devices",
                              "Devices whose settings could not be read at the last pass",
                              registry=reg)
        self.m_errors = Counter("fabricops_config_drift_errors",
                                "Passes that failed as a whole", registry=reg)

    def check_once(self) -> DriftResult:
        """Read, compare, publish one pass; returns it."""
        now = self.clock_ns()
        running, unread = self.read(sorted(self.intended))
        out = DriftResult(unread=unread)
        for device, have in running.items():
            wanted = self.intended.get(device, {})
            now_off = {k: (have.get(k), v) for k, v in wanted.items() if have.get(k) != v}
            before = self._drifted.get(device, {})
            for key, (found, want) in now_off.items():
                if before.get(key) != (found, want):
                    out.events.append(Event(
                        ts_ns=now, device=device, entity=_entity(device, key),
                        metric=f"config.{split_key(key)[1]}", kind=EventKind.STATE_CHANGE,
                        value=_number(found), severity=Severity.WARNING,
                        detail=f"{key} is {found!r}, intent {want!r}"))
            for key in before.keys() - now_off.keys():
                out.events.append(Event(
                    ts_ns=now, device=device, entity=_entity(device, key),
                    metric=f"config.{split_key(key)[1]}", kind=EventKind.CLEARED,
                    value=_number(have.get(key)), severity=Severity.INFO,
                    detail=f"{key} is back at its intent"))
            if now_off and now_off != before:
                out.diagnoses.append(drift_diagnosis(device, now_off, now))
            self._drifted[device] = now_off
        self.m_passes.inc()
        self.m_drifted.set(sum(len(v) for v in self._drifted.values()))
        self.m_unread.set(len(unread))
        self.publish(out)
        return out

    def start(self) -> None:
        """Check every ``interval_s`` on a thread until ``stop``."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="config-drift", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.check_once()
            except Exception:  # a pass that fails is counted and logged; the next one runs
                self.m_errors.inc()
                log.exception("config drift: pass failed")
            self._stop.wait(self.config.interval_s)


__all__ = ["DRIFT", "DriftConfig", "DriftResult", "DriftWatch", "drift_diagnosis"]
