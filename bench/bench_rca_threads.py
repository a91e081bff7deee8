"""CPU time of scoring RCA candidates: on one OpenMP thread (``RcaModel.class_probs``)
beside scikit-learn's default (one thread per core), on an idle machine and with
every core busy with other work, as the collectors and the pipeline keep it.

Rows are features of the packaged model drawn at random (scoring time depends on
the row count and the trees, not on the values). Per row count it prints the
CPU time (``time.process_time``, all threads of this process) and the wall time
of one call, the median of ``--calls`` calls, and the default's CPU time over
one thread's. The busy case starts one process per core that spins for the
whole measurement.

    python bench/bench_rca_threads.py [--calls 10] [--rows 50 500 5000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from fabricops.rca.features import FEATURES
from fabricops.rca.model import DEFAULT_MODEL, RcaModel


def _spin(stop: mp.synchronize.Event) -> None:
    while not stop.is_set():
        sum(range(10_000))


def _per_call(run: Callable[[], object], calls: int) -> tuple[float, float]:
    """Median CPU and wall milliseconds of one call."""
    cpu, wall = [], []
    for _ in range(calls):
        t, w = time.process_time(), time.perf_counter()
        run()
        cpu.append(time.process_time() - t)
        wall.append(time.perf_counter() - w)
    return 1e3 * statistics.median(cpu), 1e3 * statistics.median(wall)


def measure(model: RcaModel, rows: list[int], calls: int, label: str) -> None:
    print(f"\n{label}")
    print(f"  {'rows':>6}  {'one thread':>18}  {'default':>18}  {'CPU ratio':>9}")
    print(f"  {'':>6}  {'CPU ms':>8} {'wall ms':>9}  {'CPU ms':>8} {'wall ms':>9}")
    rng = np.random.default_rng(0)
    for n in rows:
        x = rng.normal(size=(n, len(FEATURES)))
        one = _per_call(lambda x=x: model.class_probs(x), calls)
        default = _per_call(lambda x=x: model.estimator.predict_proba(x), calls)
        print(f"  {n:>6,}  {one[0]:>8.2f} {one[1]:>9.2f}  {default[0]:>8.2f} "
              f"{default[1]:>9.2f}  {default[0] / max(one[0], 1e-9):>8.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--rows", type=int, nargs="+", default=[50, 500, 5000])
    args = parser.parse_args()
    model = RcaModel.load(DEFAULT_MODEL)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    measure(model, args.rows, args.calls, f"idle machine ({cores} cores)")
    stop = mp.Event()
    spinners = [mp.Process(target=_spin, args=(stop,), daemon=True) for _ in range(cores or 1)]
    for p in spinners:
        p.start()
    try:
        measure(model, args.rows, args.calls, f"every core busy ({len(spinners)} spinning "
                                              "processes)")
    finally:
        stop.set()
        for p in spinners:
            p.join()


if __name__ == "__main__":
    main()
