"""Where one recorded run's time goes, in process: the producer side
(`enqueue_job()`: insert, publish, mark published) and the worker side
(`runs.execution.execute()`: claim, lock, the no-op, the end, the heartbeat),
each for N runs of N distinct no-op jobs, under cProfile and with every SQL
statement captured.

    .venv/bin/python -m benchmarks.profile_run --db postgresql -n 500
    .venv/bin/python -m benchmarks.profile_run --db sqlite --top 40

It owns what it touches, like the benchmark: a private redis-server on a
free port (the published messages pile up there, no worker consumes them),
a SQLite file in a temporary directory or the PostgreSQL database
takt_bench (dropped at the end). It prints, per side: wall and CPU time per
run (this process; cProfile roughly doubles pure-Python time, so read the
split, not the totals), the statements per run with the most frequent ones
(literals taken out), and the functions by cumulative and own time. What it
cannot see: Celery's own cost around a task in a worker (use py-spy on a
real worker's pool children for that) and the database server's CPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from benchmarks import infra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("-n", type=int, default=300, help="runs per side (default 300)")
    parser.add_argument("--top", type=int, default=30, help="functions listed (default 30)")
    parser.add_argument(
        "--dispatch", type=int, metavar="K",
        help="instead: one beat tick with K runs due at once (the beat's side of table 2)",
    )  # fmt: skip
    parser.add_argument(
        "--idle", type=int, metavar="N",
        help="instead: 500 idle beat ticks with N idle jobs (table 1's case)",
    )  # fmt: skip
    args = parser.parse_args()
    with infra.private_stack(args.db, args.pg_url) as (_work, env):
        subprocess.run(
            [sys.executable, "-m", "benchmarks.profile_inner",
             *(["dispatch", str(args.dispatch)] if args.dispatch
               else ["idle", str(args.idle)] if args.idle else [str(args.n)]),
             str(args.top)],
            cwd=infra.ROOT, env=env, check=True, timeout=1800,
        )  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    main()
