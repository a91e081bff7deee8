"""Start-up errors: how long each long-running command takes to refuse a bad flag or
file, and what it prints.

Runs every case of ``tests/cli/startup_cases.py`` (a missing or invalid alerts
file, a bad webhook or database URL, a port already taken, a Kafka bootstrap
that refuses) as a real ``fabricops`` process, ``--repeat`` times, and prints
per case the exit code, the lines on stderr, the wall seconds (median and
worst) and the error line. Part of the time is Python importing fabricops;
``fabricops --version`` is timed as that floor.

    python bench/bench_startup_errors.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cli.startup_cases import CASES, prepare, run_case, run_fabricops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fabricops-startup-") as tmp:
        folder = Path(tmp)
        prepare(folder)
        floor = [run_fabricops(["--version"], folder).seconds for _ in range(args.repeat)]
        print(f"{'fabricops --version (import floor)':<34} {'':>4} {'':>5} "
              f"{statistics.median(floor):6.2f} {max(floor):6.2f}")
        print(f"{'case':<34} {'exit':>4} {'lines':>5} {'median':>6} {'worst':>6}  error line")
        for case in CASES:
            runs = [run_case(case, folder)[0] for _ in range(args.repeat)]
            times = [r.seconds for r in runs]
            last = runs[-1]
            line = last.stderr_lines[0] if last.stderr_lines else ""
            print(f"{case.name:<34} {last.code:>4} {len(last.stderr_lines):>5} "
                  f"{statistics.median(times):6.2f} {max(times):6.2f}  {line}")


if __name__ == "__main__":
    main()
