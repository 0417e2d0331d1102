"""Capacity of one database: how many fire times per second Takt's beats
publish, and how many runs per second its workers record, as beats and
workers are added on this machine.

    .venv/bin/python -m benchmarks.capacity [--db postgresql] [--due 20000]
        [--beats 1,2,4] [--runs 3000] [--workers 1,2,3,4] [--reps 2]

It owns what it touches, like ``make bench``: a private redis-server on a
free port and the PostgreSQL database takt_bench (dropped at the end), or a
SQLite file in a temporary directory.

Beats: `--due` jobs with daily triggers wait parked a day ahead while B
real beats run (1-second poll). Each repetition empties the run table and
the queue and moves every trigger to one fire time about 1.5 s ahead; the
clock stops when the private Redis holds `--due` messages. Afterwards the
run table must hold exactly `--due` runs, every one marked sent, and Redis
exactly `--due` messages: a duplicate fails the measurement.

Workers: `--runs` runs of as many no-op jobs are recorded and published
with ``enqueue_job()`` while no worker runs; the queue's lists are then
renamed aside, W worker processes (prefork, concurrency 2 each) started,
and the lists renamed back in one step once every worker is up. The figure
is `--runs` divided by the time from the first run's start to the last
run's end (from the run rows).

For both, CPU per run (ms) is split between the machine (all cores), the
beats or workers (each process tree), the database server and Redis, and
"busy" says how much of the machine's cores the window used: near 100 %,
the machine is the limit, not the database.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import infra

RESULTS = Path(__file__).resolve().parent / "results"
LEAD_S = 1.5
WORKER_CONCURRENCY = 2


@dataclass
class CpuMark:
    wall: float
    cpu: Any  # benchmarks.measure_e2e.Cpu: the machine, this process, the trees, the servers


def cpu_mark(pids: list[int]) -> CpuMark:
    """Busy CPU seconds so far (measure_e2e.Cpu), the beats' or workers'
    process trees counted together."""
    from benchmarks.measure_e2e import Cpu

    return CpuMark(time.monotonic(), Cpu.now(*pids))


def cpu_split(before: CpuMark, after: CpuMark, n: int, role: str) -> dict[str, float]:
    """ms per run for each part, and the window's busy share of all cores."""
    import psutil

    machine, producer, tree, database, redis = after.cpu.per_run_ms(before.cpu, n)
    busy = machine * n / 1000 / ((after.wall - before.wall) * (psutil.cpu_count() or 1))
    return {"machine": machine, role: tree, "this process": producer, "database": database,
            "redis": redis, "busy %": 100 * busy}  # fmt: skip


def beats_case(ctx: Any, due: int, beats: int, reps: int) -> list[dict[str, Any]]:
    from django.db import connection
    from django.utils import timezone

    from benchmarks import seed
    from benchmarks.noop import noop_task
    from benchmarks.suite_ctx import wait_until
    from jobs.models import Trigger
    from runs.models import Run

    seed.wipe()
    ids = seed.add_due_jobs(due, parked_at=timezone.now() + timedelta(days=1))
    procs = [infra.start_beat(ctx.env, ctx.log_dir) for _ in range(beats)]
    results = []
    try:
        time.sleep(2.0)  # every beat's first ticks are done
        for _ in range(reps):
            with connection.cursor() as cur:
                cur.execute(f"DELETE FROM {Run._meta.db_table}")
            ctx.drop_queued_messages()
            fire = timezone.now() + timedelta(seconds=LEAD_S)
            Trigger.objects.filter(pk__in=ids).update(next_run_at=fire)
            time.sleep(max(0.0, fire.timestamp() - time.time()))
            before = cpu_mark([p.pid for p in procs])
            done_at = wait_until(
                lambda: ctx.queued_messages() >= due, timeout=300, what=f"{due} messages"
            )
            after = cpu_mark([p.pid for p in procs])
            elapsed = done_at - fire.timestamp()
            time.sleep(2.0)  # anything late or doubled would show now
            runs = Run.objects.count()
            sent = Run.objects.filter(published_at__isnull=False).count()
            messages = ctx.queued_messages()
            if not runs == sent == messages == due:
                raise RuntimeError(
                    f"{beats} beats, {due} due: {runs} runs, {sent} marked sent, "
                    f"{messages} messages"
                )
            split = cpu_split(before, after, due, "beats")
            results.append({"seconds": elapsed, "rate": due / elapsed, **split})
            ctx.say(
                f"capacity: {beats} beat(s): {due:,} due published in {elapsed:.2f} s "
                f"({due / elapsed:,.0f}/s), busy {split['busy %']:.0f} %"
            )
            time.sleep(1.0)
    finally:
        for proc in procs:
            proc.stop()
    ctx.drop_queued_messages()
    anchor = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(due):
            noop_task.delay()
        anchor.append(due / (time.perf_counter() - t0))
        ctx.drop_queued_messages()
    return [
        {"case": "beats", "count": beats, "n": due, "anchor": statistics.median(anchor),
         **_median(results)}
    ]  # fmt: skip


def _drain(ctx: Any, n: int, workers: int, fill: Any, done: Any) -> dict[str, float]:
    """Fill the queue with `n` messages while no worker runs, put its lists
    aside, start the workers, give the lists back in one step and wait
    until `done()`: the rate and CPU split of that window."""
    from benchmarks.suite_ctx import QUEUE_KEYS, wait_until

    fill()
    held = [k for k in QUEUE_KEYS if ctx.redis.exists(k)]
    pipe = ctx.redis.pipeline(transaction=True)
    for key in held:
        pipe.rename(key, f"held:{key}")
    pipe.execute()
    procs = [
        infra.start_worker(ctx.env, ctx.log_dir, concurrency=WORKER_CONCURRENCY)
        for _ in range(workers)
    ]
    try:
        time.sleep(3.0)  # past the banner: connected and consuming
        pids = [p.pid for p in procs]
        before = cpu_mark(pids)
        pipe = ctx.redis.pipeline(transaction=True)
        for key in held:
            pipe.rename(f"held:{key}", key)
        pipe.execute()
        wait_until(done, timeout=60 + n / 20, every=0.02, what=f"{n} done")
        after = cpu_mark(pids)
    finally:
        for proc in procs:
            proc.stop()
    seconds = after.wall - before.wall
    return {"seconds": seconds, "rate": n / seconds, **cpu_split(before, after, n, "workers")}


def workers_case(ctx: Any, n: int, workers: int, reps: int) -> list[dict[str, Any]]:
    from django.db import connection

    from benchmarks import seed
    from benchmarks.noop import DONE_KEY, noop_task
    from runs.models import Run, RunStatus
    from runs.services import enqueue_job

    seed.wipe()
    ctx.drop_queued_messages()
    jobs = seed.add_plain_jobs(n)

    def takt_fill() -> None:
        with connection.cursor() as cur:
            cur.execute(f"DELETE FROM {Run._meta.db_table}")
        for job in jobs:
            enqueue_job(job, trigger="api")

    def plain_fill() -> None:
        ctx.redis.set(DONE_KEY, 0)
        for _ in range(n):
            noop_task.delay()

    results, anchor = [], []
    for _ in range(reps):
        results.append(
            _drain(ctx, n, workers, takt_fill,
                   lambda: Run.objects.filter(status=RunStatus.SUCCEEDED).count() >= n)
        )  # fmt: skip
        anchor.append(
            _drain(ctx, n, workers, plain_fill, lambda: int(ctx.redis.get(DONE_KEY) or 0) >= n)
        )
        ctx.say(
            f"capacity: {workers} worker(s) x {WORKER_CONCURRENCY}: {n:,} runs in "
            f"{results[-1]['seconds']:.2f} s ({results[-1]['rate']:,.0f}/s, plain Celery "
            f"{anchor[-1]['rate']:,.0f}/s), busy {results[-1]['busy %']:.0f} %"
        )
    ctx.drop_queued_messages()
    return [
        {"case": "workers", "count": workers, "n": n,
         "anchor": statistics.median(a["rate"] for a in anchor),
         "anchor busy %": statistics.median(a["busy %"] for a in anchor), **_median(results)}
    ]  # fmt: skip


def _median(results: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def inner(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from benchmarks.suite_ctx import Ctx

    # The beats and workers run with Takt's own settings, as in `make bench`.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "scheduler_project.settings"}
    ctx = Ctx(args.db, env, Path(args.log_dir), os.environ["REDIS_URL"])
    rows: list[dict[str, Any]] = []
    for beats in _ints(args.beats):
        rows += beats_case(ctx, args.due, beats, args.reps)
    for workers in _ints(args.workers):
        rows += workers_case(ctx, args.runs, workers, args.reps)
    Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


ROLE = {"beats": "beats", "workers": "workers"}
ANCHOR = {
    "beats": "anchor: plain `delay()` calls per second, one process",
    "workers": "anchor: plain Celery no-op tasks per second, same workers",
}


def render(rows: list[dict[str, Any]], db: str, note: str) -> str:
    lines = [f"### Capacity on one {db} ({note})", ""]
    for case, what, unit in (
        ("beats", "beats", "fire times published per second"),
        ("workers", "worker processes (concurrency 2)", "runs recorded per second"),
    ):
        mine = [r for r in rows if r["case"] == case]
        if not mine:
            continue
        lines += [
            f"| {what} | {unit} | seconds for {mine[0]['n']:,} | {ANCHOR[case]} | Takt ÷ anchor "
            f"| CPU ms per run: machine | {case} | database server | Redis | busy (of all cores) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in mine:
            lines.append(
                f"| {r['count']} | {r['rate']:,.0f} | {r['seconds']:.2f} | {r['anchor']:,.0f} "
                f"| {r['rate'] / r['anchor']:.2f}× | {r['machine']:.2f} | {r[ROLE[case]]:.2f} "
                f"| {r['database']:.2f} | {r['redis']:.2f} | {r['busy %']:.0f} % |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("--due", type=int, default=20_000, help="runs due at once (beats)")
    parser.add_argument("--beats", default="1,2,4")
    parser.add_argument("--runs", type=int, default=3_000, help="runs executed (workers)")
    parser.add_argument("--workers", default="1,2,3,4")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--label", default="capacity")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args)
        return
    started = time.monotonic()
    with infra.private_stack(args.db, args.pg_url) as (work, env):
        out = work / "rows.json"
        log_dir = work / "logs"
        log_dir.mkdir()
        argv = [sys.executable, "-m", "benchmarks.capacity", "--inner", "--db", args.db,
                "--due", str(args.due), "--beats", args.beats, "--runs", str(args.runs),
                "--workers", args.workers, "--reps", str(args.reps),
                "--log-dir", str(log_dir), "--out", str(out)]  # fmt: skip
        subprocess.run(
            argv, cwd=infra.ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "benchmarks.settings"},
            check=True, timeout=3600,
        )  # fmt: skip
        rows = json.loads(out.read_text())
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=infra.ROOT, capture_output=True, text=True
    ).stdout.strip()
    note = (
        f"{commit}, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, "
        f"median of {args.reps}, {(time.monotonic() - started) / 60:.1f} min"
    )
    text = render(rows, {"postgresql": "PostgreSQL", "sqlite": "SQLite"}[args.db], note)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.label}-{args.db}.md").write_text(text + "\n")
    (RESULTS / f"{args.label}-{args.db}.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
