"""How long a ``fabricops`` command takes to start and answer, wall and CPU.

Each command runs as a new process, ``--repeat`` times; printed: the median
wall seconds, the median CPU seconds of the child (user + system), and the same
for ``python -c pass`` measured in the same run (the floor no command can beat).
Read-only commands run against an empty SQLite store made here.

    python bench/bench_cli_start.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and child CPU seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env={**os.environ, "COLUMNS": "80"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    fabricops = [sys.executable, "-m", "fabricops.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/empty.db"
        subprocess.run([*fabricops, "query", "events", "--db", db], capture_output=True,
                       check=False)
        cases = [("python -c pass (floor)", [sys.executable, "-c", "pass"]),
                 ("fabricops --help", [*fabricops, "--help"]),
                 ("fabricops actions --help", [*fabricops, "actions", "--help"]),
                 ("fabricops up --help", [*fabricops, "up", "--help"]),
                 ("fabricops actions list --db", [*fabricops, "actions", "list", "--db", db]),
                 ("fabricops query events --db", [*fabricops, "query", "events", "--db", db])]
        print(f"{'command':32} {'wall s':>8} {'cpu s':>8}")
        for name, argv in cases:
            runs = [timed(argv) for _ in range(args.repeat)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            print(f"{name:32} {wall:8.3f} {cpu:8.3f}")


if __name__ == "__main__":
    main()
