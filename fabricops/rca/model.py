"""The RCA model: scores candidate rows and names a fault type, versioned on disk.

One scikit-learn classifier over candidate rows (``features.FEATURES``) with
the classes ``healthy`` and every fault type. A candidate's root score is
``1 - P(healthy)``; its fault type is the most likely type its kind allows (a
link cannot have a PFC storm). The file holds a header (format version, model
version, feature and class names, scikit-learn version, training summary) and
the estimator; ``load`` refuses a file whose format or features do not match
this code, naming the file and the cause. Model files are pickles: load only
files you trust (your own ``fabricops rca train`` output, or the packaged one).
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import joblib
import numpy as np
import numpy.typing as npt
import sklearn
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import ThreadpoolController

from fabricops.core.faults import TARGETS, FaultType
from fabricops.rca.features import FEATURES, LINK, NIC, OWN, SWITCH

FORMAT: Final = "fabricops-rca-model"
FORMAT_VERSION: Final = 1
HEALTHY: Final = "healthy"
DEFAULT_MODEL: Final = Path(__file__).parent / "models" / "default.rcamodel"
CLASSES: Final = (HEALTHY, *(t.value for t in FaultType))
_KIND_OF_TARGET: Final = {"link": (LINK,), "switch": (SWITCH,), "nic": (NIC,),
                          "host_or_nic": (NIC,)}
F64 = npt.NDArray[np.float64]


class ModelError(ValueError):
    """A model file that cannot be used; the message names the file and the cause."""


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The native thread pools loaded (scikit-learn's OpenMP among them), found once."""
    return ThreadpoolController()


def one_thread() -> None:
    """Limit native thread pools to one thread for good (for worker processes on a shared
    machine)."""
    _thread_pools().limit(limits=1)


def allowed_mask() -> npt.NDArray[np.bool_]:
    """kinds x CLASSES: which fault types a candidate of each kind can have."""
    mask = np.zeros((3, len(CLASSES)), bool)
    for j, name in enumerate(CLASSES[1:], start=1):
        for kind in _KIND_OF_TARGET[TARGETS[FaultType(name)]]:
            mask[kind, j] = True
    return mask


@dataclass
class RcaModel:
    """A fitted classifier and its header."""

    estimator: Any
    version: str
    trained: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fit(cls, x: F64, y: npt.NDArray[np.int64], *, weight: F64 | None = None,
            seed: int = 0, trained: dict[str, Any] | None = None) -> RcaModel:
        est = HistGradientBoostingClassifier(
            max_iter=150, learning_rate=0.1, max_leaf_nodes=31, l2_regularization=1.0,
            random_state=seed, early_stopping=False)
        est.fit(x, y, sample_weight=weight)
        digest = hashlib.sha256(x[: min(len(x), 4096)].tobytes()).hexdigest()[:10]
        summary = {"rows": len(x), **(trained or {})}
        return cls(est, f"rca-{FORMAT_VERSION}-{digest}", summary)

    def class_probs(self, x: F64) -> F64:
        """P(class) per row over CLASSES (classes absent from training get 0).

        On one OpenMP thread: a tick scores tens to thousands of rows, and OpenMP's
        other threads wait for work by spinning, which on cores busy with the
        collectors and the pipeline costs many times the CPU time of the scoring
        itself (``python bench/bench_rca_threads.py``).
        """
        out = np.zeros((len(x), len(CLASSES)))
        if len(x):
            with _thread_pools().limit(limits=1, user_api="openmp"):
                out[:, self.estimator.classes_] = self.estimator.predict_proba(x)
        return out

    def scores(self, x: F64, kind: npt.NDArray[np.int8],
               focus: npt.NDArray[np.bool_] | None = None) -> tuple[F64, npt.NDArray[np.int64]]:
        """Per row: root score and the index (into CLASSES) of its most likely allowed type.

        Rows with nothing unusual on the entity itself (all its own features zero),
        and rows outside ``focus`` when given, are healthy without asking the
        classifier.
        """
        allowed = allowed_mask()
        healthy = np.zeros(len(CLASSES))
        healthy[0] = 1.0
        idle = np.where(allowed, healthy, 0.0)  # what a row not asked gets, per kind
        root = idle.sum(axis=1)[kind]
        best = np.argmax(idle, axis=1).astype(np.int64)[kind]
        if focus is None:
            active = np.flatnonzero(np.abs(x[:, OWN]).sum(axis=1) > 0)
        else:  # only the rows in focus are looked at
            near = np.flatnonzero(focus)
            active = near[np.abs(x[near, OWN]).sum(axis=1) > 0]
        if len(active):
            typed = np.where(allowed[kind[active]], self.class_probs(x[active]), 0.0)
            root[active] = typed.sum(axis=1)
            best[active] = np.argmax(typed, axis=1)
        return root, best

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        header = {"format": FORMAT, "format_version": FORMAT_VERSION, "version": self.version,
                  "features": list(FEATURES), "classes": list(CLASSES),
                  "sklearn": sklearn.__version__, "trained": self.trained}
        buf = io.BytesIO()
        joblib.dump(self.estimator, buf, compress=3)
        blob = json.dumps(header).encode()
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_bytes(len(blob).to_bytes(4, "big") + blob + buf.getvalue())
        tmp.replace(p)
        return p

    @classmethod
    def load(cls, path: str | Path) -> RcaModel:
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise ModelError(f"model {p}: cannot read: {exc.strerror or exc}") from None
        try:
            n = int.from_bytes(data[:4], "big")
            header = json.loads(data[4:4 + n])
        except (ValueError, UnicodeDecodeError):
            raise ModelError(f"model {p}: not a fabricops RCA model (no header)") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ModelError(f"model {p}: not a fabricops RCA model")
        if header.get("format_version") != FORMAT_VERSION:
            raise ModelError(f"model {p}: format version {header.get('format_version')}, this "
                             f"fabricops reads {FORMAT_VERSION}; retrain with 'fabricops rca "
                             "train'")
        if tuple(header.get("features", ())) != FEATURES or tuple(
                header.get("classes", ())) != CLASSES:
            raise ModelError(f"model {p}: its features or classes differ from this fabricops; "
                             "retrain with 'fabricops rca train'")
        if header.get("sklearn") != sklearn.__version__:
            warnings.warn(f"model {p} was saved with scikit-learn {header.get('sklearn')}, "
                          f"running {sklearn.__version__}", stacklevel=2)
        try:
            est = joblib.load(io.BytesIO(data[4 + n:]))
        except Exception as exc:
            raise ModelError(f"model {p}: estimator cannot be loaded: {exc}") from None
        return cls(est, str(header["version"]), dict(header.get("trained", {})))
