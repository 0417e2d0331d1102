"""Where a real worker's CPU goes per recorded run: py-spy on the pool child
of a `celery worker` (prefork, concurrency 1) while it executes N no-op
runs, the same ones `make bench` times end to end.

    .venv/bin/python -m benchmarks.profile_worker --db postgresql -n 3000
    .venv/bin/python -m benchmarks.profile_worker --db sqlite --top 40

It owns what it touches, like the benchmark (a private redis-server on a
free port, a SQLite file in a temporary directory or the PostgreSQL
database takt_bench, dropped at the end). The runs are inserted and
published before the worker starts, so that the profile holds the worker's
side only. py-spy samples the pool child without stopping it (idle samples
left out, and only the thread holding the GIL: what remains is CPU); the report groups the samples by where
the time was spent (Celery and kombu around the task, Takt's own code,
Django's ORM, the database driver, Redis, logging) and lists the functions
by inclusive and own share. Needs py-spy (`pip install -e .[bench]`) and
ptrace rights (root, or kernel.yama.ptrace_scope 0).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from benchmarks import infra

GROUPS = (  # first match wins, looked for at the start of the frame's file
    ("takt", ("runs/", "jobs/", "heartbeats/", "scheduler_project/")),
    ("database driver", ("psycopg", "sqlite3/")),
    ("Django ORM", ("django/db/",)),
    ("Django other", ("django/", "asgiref/")),
    ("redis-py", ("redis/",)),
    ("logging", ("logging/",)),
    ("Celery and kombu", ("celery/", "kombu/", "billiard/", "vine/", "amqp/")),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("-n", type=int, default=2000, help="runs (default 2000)")
    parser.add_argument("--top", type=int, default=30, help="functions listed (default 30)")
    parser.add_argument(
        "--parent", action="store_true",
        help="profile the worker's main process (it takes the messages) instead of its pool child",
    )  # fmt: skip
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:
        inner(args.n, args.top, parent=args.parent)
        return
    with infra.private_stack(args.db, args.pg_url) as (work, env):
        argv = [sys.executable, "-m", "benchmarks.profile_worker", "--inner",
                "-n", str(args.n), "--top", str(args.top)]  # fmt: skip
        argv += ["--parent"] if args.parent else []
        subprocess.run(argv, cwd=infra.ROOT, env={**env, "BENCH_WORK": str(work)}, check=True,
                       timeout=1800)  # fmt: skip


def inner(n: int, top: int, *, parent: bool) -> None:
    import django
    import psutil

    django.setup()
    from jobs.models import Job
    from runs.models import Run, RunStatus
    from runs.services import enqueue_job

    work = Path(os.environ["BENCH_WORK"])
    jobs = Job.objects.bulk_create(
        Job(key=f"profile.{i}", name=f"profile.{i}", target="bench.noop") for i in range(n)
    )
    ids = [enqueue_job(job, trigger="api").id for job in jobs]  # queued and published
    worker = infra.start_worker(dict(os.environ), work, concurrency=1)
    main = psutil.Process(worker.popen.pid)
    child = main if parent else _pool_child(main)
    raw = work / "worker.txt"
    spy = subprocess.Popen(
        [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(child.pid),
         "--rate", "250", "--format", "raw", "-o", str(raw), "--nonblocking", "--gil"],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
    )  # fmt: skip
    cpu_before = sum(child.cpu_times()[:2])
    started = time.perf_counter()
    done = Run.objects.filter(id__in=ids, status=RunStatus.SUCCEEDED)
    while done.count() < n:
        if time.perf_counter() - started > 600:
            sys.exit(f"only {done.count()} of {n} runs succeeded in 600 s")
        time.sleep(0.2)
    wall = time.perf_counter() - started
    cpu = sum(child.cpu_times()[:2]) - cpu_before
    spy.send_signal(signal.SIGINT)
    spy.wait(timeout=60)
    worker.stop()
    which = "main process" if parent else "pool child"
    print(f"\n## a worker's {which} (concurrency 1), {n} no-op runs on {_vendor()}")
    print(f"{n / wall:.0f} runs/s; CPU of the {which} {cpu / n * 1000:.2f} ms/run "
          "(sampled with py-spy: add a few per cent for the sampling)")  # fmt: skip
    report(raw, top)


def _pool_child(parent):  # type: ignore[no-untyped-def]
    for _ in range(100):
        children = parent.children()
        if children:
            return children[0]
        time.sleep(0.1)
    sys.exit("the worker started no pool child")


def _vendor() -> str:
    from django.db import connection

    return connection.vendor


def report(raw: Path, top: int) -> None:
    """py-spy's raw format: one line per distinct stack, frames from the
    outermost, separated by ';', then the sample count."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = stack.split(";")
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
        groups[_group(frames[-1])] += count
    if not total:
        print("no samples")
        return
    print(f"{total} samples; where the CPU went (by the innermost frame's file):")
    for name, count in groups.most_common():
        print(f"  {count / total:6.1%}  {name}")
    takt = Counter({f: c for f, c in inclusive.items() if _group(f) == "takt"})
    for title, counter in (("inclusive", inclusive), ("own", own), ("inclusive, Takt's", takt)):
        print(f"\nfunctions by {title} share:")
        for frame, count in counter.most_common(top):
            print(f"  {count / total:6.1%}  {frame}")


def _group(frame: str) -> str:
    where = frame.rpartition("(")[2]  # "function (path/file.py:line)"
    for name, needles in GROUPS:
        if where.startswith(needles):
            return name
    return "other (interpreter, json, threading, …)"


if __name__ == "__main__":
    main()
