"""What the durable decision log (F-65, runs/decisions.py) costs the beat:
one tick claiming K due runs, and an idle tick, on the old path (claim,
publish, record the decisions with one pipelined XADD: runs.tick._dispatch,
which is the whole tick before the log was durable) next to the new one
(the same, then the drain: XRANGE, one bulk INSERT of the K entries,
XDEL: runs.tick.run_tick), in one process, the two interleaved rep by rep.

    .venv/bin/python -m benchmarks.decision_drain --db postgresql
    .venv/bin/python -m benchmarks.decision_drain --db sqlite -k 500 2000 --reps 9

It owns what it touches, like the benchmark (benchmarks/infra.py): a
private redis-server, a SQLite file or the PostgreSQL database takt_bench.
Between reps (untimed) the runs, the decision rows, the stream and the
published messages are deleted, so each rep starts from the same state.
Prints the median milliseconds per tick of each path and new / old.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta

from benchmarks import infra


def inner(ks: list[int], reps: int, idle_ticks: int) -> None:
    import django

    django.setup()
    import logging

    logging.disable(logging.WARNING)
    from django.utils import timezone

    from benchmarks import seed
    from jobs.models import Trigger
    from runs.decisions import decision_key
    from runs.locks import get_redis
    from runs.models import Run, SchedulerDecision
    from runs.tick import _dispatch, reset_periodic_passes, run_tick

    client = get_redis()

    def reset() -> None:
        Run.objects.all().delete()
        SchedulerDecision.objects.all().delete()
        client.delete(decision_key(), *client.scan_iter(_type="list"))

    def timed(tick: Callable[..., float], now: object) -> float:
        reset_periodic_passes()
        started = time.perf_counter()
        tick(now=now, hold_jobs=frozenset())
        return (time.perf_counter() - started) * 1000

    def report(case: str, old: list[float], new: list[float]) -> None:
        o, n = statistics.median(old), statistics.median(new)
        print(f"{case:<34} old {o:8.2f} ms   new {n:8.2f} ms   new/old {n / o:5.2f}")

    parked = timezone.now() + timedelta(days=1)
    ids: list[int] = []
    for k in ks:
        ids += seed.add_due_jobs(k - len(ids), parked_at=parked)
        old, new = [], []
        for rep in range(reps + 1):  # the first pair warms up
            pair = []
            for tick in (_dispatch, run_tick):
                reset()
                Trigger.objects.filter(pk__in=ids).update(next_run_at=parked)
                fire = timezone.now()
                Trigger.objects.filter(pk__in=ids).update(next_run_at=fire)
                pair.append(timed(tick, fire))
            assert SchedulerDecision.objects.count() == k, "the new path drained every entry"
            if rep:
                old.append(pair[0])
                new.append(pair[1])
        report(f"one tick, {k} runs due", old, new)
    Trigger.objects.filter(pk__in=ids).update(next_run_at=parked)
    reset()
    old, new = [], []
    reset_periodic_passes()
    for _ in range(idle_ticks):  # as a beat ticks: its periodic passes now and then
        for tick, into in ((_dispatch, old), (run_tick, new)):
            started = time.perf_counter()
            tick(now=timezone.now(), hold_jobs=frozenset())
            into.append((time.perf_counter() - started) * 1000)
    report(f"idle tick ({len(ids)} jobs)", old, new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("-k", type=int, nargs="+", default=[500, 2000], help="runs due")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--idle", type=int, default=200, help="idle ticks per path")
    args = parser.parse_args()
    with infra.private_stack(args.db, args.pg_url) as (_work, env):
        subprocess.run(
            [sys.executable, "-m", "benchmarks.decision_drain", "inner", str(args.reps),
             str(args.idle), *map(str, sorted(args.k))],
            cwd=infra.ROOT, env=env, check=True, timeout=1800,
        )  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
    if sys.argv[1:2] == ["inner"]:
        inner([int(k) for k in sys.argv[4:]], int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
