"""`make chaos`: the long chaos test (about 10 minutes).

    python -m tests.chaos.run [--minutes 10] [--seed N] [--short] [--dir PATH]

Prints the schedule, each action as it happens, and the table; exits 1
unless every criterion held. The run's logs, side channel, kill log and
table stay in the directory (default var/chaos/<time>)."""

from __future__ import annotations

import argparse
import os
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import django


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.run", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="about how long in all (default 10)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="the chaos schedule's seed (default: random, printed)",
    )
    parser.add_argument(
        "--short", action="store_true", help="the short form of the pytest marker chaos"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the logs and the table go")
    parser.add_argument(
        "--analyse",
        type=Path,
        default=None,
        metavar="DIR",
        help="only the checks again, on a finished run's directory",
    )
    args = parser.parse_args(argv)
    if args.minutes < 4 and not args.short:
        parser.error("--minutes: at least 4 (or --short)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    django.setup()  # the job definitions import Takt's registry
    from tests.chaos.harness import reanalyse, run_chaos

    if args.analyse is not None:
        again = reanalyse(args.analyse)
        print(again.markdown())
        return 0 if again.passed else 1
    from tests.chaos.schedule import SHORT, long_profile

    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    workdir = args.dir or Path("var/chaos") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    profile = SHORT if args.short else long_profile(args.minutes)
    report = run_chaos(profile, seed=seed, workdir=workdir.resolve())
    print(f"\nlogs, side channel and table in {workdir}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
