"""4. End-to-end overhead: N no-op runs through Takt against N no-op
``delay()`` calls in plain Celery, on one real worker (prefork,
concurrency 2, Takt's Celery settings: acks late, prefetch 1, priority
queues).

Takt: N jobs targeting ``bench.noop``; the clock runs from the first
``enqueue_job()`` (insert the run, publish after commit) until the database
shows N succeeded runs, each having gone through the worker's
compare-and-set, job lock, lock keeper, finish and heartbeat.
Plain Celery: ``bench.noop_task.delay()`` N times; the clock runs until
the tasks' Redis counter reaches N (each task does one INCR: no result
backend). Both are polled every 20 ms from this process. The two sides
alternate within each repetition; a warm-up round runs first. For Takt two
more figures locate the cost: enqueue_job() calls per second (the
producer loop alone) and the worker side (N divided by the time from the
first run's start to the last run's finish, from the run rows).

CPU per run (ms) says where the time goes, for both sides alike: the whole
machine's busy CPU time (user + system, all cores, from /proc/stat) over the
round divided by N, and the part of it spent in this process (the producer:
enqueue_job() or delay()) and in the worker's process tree. The rest is the
database server, Redis and anything else running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil
from django.db import connection
from django.db.models import Max, Min

from benchmarks import seed
from benchmarks.infra import start_worker, tree_rss_mb
from benchmarks.noop import DONE_KEY, noop_task
from benchmarks.suite_ctx import Ctx, row, wait_until
from jobs.models import Job
from runs.models import Run, RunStatus
from runs.services import enqueue_job

WARMUP = 40
CPU_PARTS = ("machine", "producer", "worker", "database server", "redis")
SERVERS = {"database server": ("postgres",), "redis": ("redis-server",)}


def _clear_runs() -> None:
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {Run._meta.db_table}")


@dataclass
class Cpu:
    """Busy CPU seconds so far: the machine, this process, the worker tree,
    the PostgreSQL server's processes (all of them: the machine is otherwise
    quiet), the redis-server processes."""

    machine: float
    producer: float
    worker: float
    database: float
    redis: float

    @classmethod
    def now(cls, *worker_pids: int) -> Cpu:
        """`worker_pids`: the roots of the process trees counted as the
        worker (benchmarks/capacity.py passes several beats or workers)."""
        t = psutil.cpu_times()
        busy = sum(getattr(t, f) for f in ("user", "nice", "system", "irq", "softirq", "steal"))
        me = psutil.Process().cpu_times()
        tree = 0.0
        for pid in worker_pids:
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                continue
            for proc in procs:
                try:
                    c = proc.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                tree += c.user + c.system
        servers = dict.fromkeys(SERVERS, 0.0)
        for proc in psutil.process_iter(["name", "cpu_times"]):
            for part, names in SERVERS.items():
                c = proc.info["cpu_times"]
                if proc.info["name"] in names and c is not None:
                    servers[part] += c.user + c.system
        return cls(busy, me.user + me.system, tree, servers["database server"], servers["redis"])

    def per_run_ms(self, before: Cpu, n: int) -> tuple[float, ...]:
        return tuple(
            1000 * (getattr(self, f) - getattr(before, f)) / n
            for f in ("machine", "producer", "worker", "database", "redis")
        )


def measured(worker_pid: int, n: int, body: Callable[[], Any]) -> tuple[Any, tuple[float, ...]]:
    before = Cpu.now(worker_pid)
    result = body()
    return result, Cpu.now(worker_pid).per_run_ms(before, n)


def takt_round(ctx: Ctx, jobs: list[Job], timeout: float) -> tuple[float, float, float]:
    """Returns (end-to-end runs/s, enqueue_job() calls/s, worker-side runs/s
    from the first run's start to the last run's finish)."""
    _clear_runs()
    n = len(jobs)
    t0 = time.time()
    for job in jobs:
        enqueue_job(job, trigger="api")
    enqueued = time.time()
    done = wait_until(
        lambda: Run.objects.filter(status=RunStatus.SUCCEEDED).count() >= n,
        timeout=timeout, what=f"{n} Takt runs",
    )  # fmt: skip
    span = Run.objects.aggregate(a=Min("started_at"), b=Max("finished_at"))
    worker_s = (span["b"] - span["a"]).total_seconds()
    return n / (done - t0), n / (enqueued - t0), n / worker_s


def plain_round(ctx: Ctx, n: int, timeout: float) -> float:
    ctx.redis.set(DONE_KEY, 0)
    t0 = time.time()
    for _ in range(n):
        noop_task.delay()
    done = wait_until(
        lambda: int(ctx.redis.get(DONE_KEY) or 0) >= n, timeout=timeout, what=f"{n} Celery tasks"
    )
    return n / (done - t0)


def plain_app_rss(ctx: Ctx, n: int) -> tuple[float, list[float]]:
    """The anchor for the worker's memory: a plain Celery app's worker (no
    Django, benchmarks/plain_app.py), same pool and concurrency, after it ran
    as many no-op tasks as Takt's worker ran runs in one round."""
    from celery import Celery

    from benchmarks import plain_app

    worker = start_worker(ctx.env, ctx.log_dir, app="benchmarks.plain_app", queue=plain_app.QUEUE)
    try:
        ctx.redis.set(plain_app.DONE_KEY, 0)
        # Not the current app: Takt's publishing and the lag section's
        # shared tasks go through Takt's app after this.
        sender = Celery("bench-sender", broker=ctx.redis_url, set_as_current=False)
        with sender.producer_or_acquire() as producer:
            for _ in range(WARMUP + n):
                sender.send_task("bench.plain_noop", queue=plain_app.QUEUE, producer=producer)
        wait_until(
            lambda: int(ctx.redis.get(plain_app.DONE_KEY) or 0) >= WARMUP + n,
            timeout=60 + n / 20, what=f"{n} plain-app tasks",
        )  # fmt: skip
        return tree_rss_mb(worker.pid)
    finally:
        worker.stop()


def run(ctx: Ctx, n: int, reps: int) -> list[dict[str, Any]]:
    seed.wipe()
    ctx.drop_queued_messages()
    jobs = seed.add_plain_jobs(n)
    worker = start_worker(ctx.env, ctx.log_dir)
    timeout = 60 + n / 20  # a floor of 20 runs/s before giving up
    takt: list[float] = []
    enqueue: list[float] = []
    worker_side: list[float] = []
    plain: list[float] = []
    cpu: dict[str, list[tuple[float, ...]]] = {"takt": [], "celery": []}
    try:
        plain_round(ctx, WARMUP, timeout=60)  # also: the worker is ready
        takt_round(ctx, jobs[:WARMUP], timeout=60)
        for i in range(reps):
            # Alternate which side goes first, so drift hits both alike.
            order = ("takt", "plain") if i % 2 == 0 else ("plain", "takt")
            for side in order:
                if side == "takt":
                    rates, used = measured(worker.pid, n, lambda: takt_round(ctx, jobs, timeout))
                    takt.append(rates[0])
                    enqueue.append(rates[1])
                    worker_side.append(rates[2])
                    cpu["takt"].append(used)
                else:
                    rate, used = measured(worker.pid, n, lambda: plain_round(ctx, n, timeout))
                    plain.append(rate)
                    cpu["celery"].append(used)
            ctx.say(f"e2e: {n:,} runs: Takt {takt[-1]:.0f}/s, plain Celery {plain[-1]:.0f}/s")
        rss = {"takt": tree_rss_mb(worker.pid)}
    finally:
        worker.stop()
    rss["celery"] = plain_app_rss(ctx, n)
    ctx.drop_queued_messages()
    seed.wipe()
    case = f"{n:,} no-op runs"
    rss_rows = [
        row("e2e", case, metric, system, "MB", values, n=n)
        for system, (main, children) in rss.items()
        for metric, values in (("worker RSS: main process", [main]),
                               ("worker RSS: pool child", children))
    ]  # fmt: skip
    cpu_rows = [
        row("e2e", case, f"CPU per run: {part}", system, "ms", [u[k] for u in cpu[system]], n=n)
        for system in ("takt", "celery")
        for k, part in enumerate(CPU_PARTS)
    ]
    return [
        *cpu_rows,
        *rss_rows,
        row("e2e", case, "runs per second", "takt", "/s", takt, n=n),
        row("e2e", case, "runs per second", "celery", "/s", plain, n=n),
        row("e2e", case, "enqueue_job() calls per second", "takt", "/s", enqueue, n=n),
        row("e2e", case, "worker side: runs per second", "takt", "/s", worker_side, n=n),
    ]
