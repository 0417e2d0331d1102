"""How the run table and its indexes grow to 10 million runs on PostgreSQL,
and what writes, retention and the list pages cost at each size.

    python -m benchmarks.capacity_table [--runs 10000000] [--steps 1000000,3000000,10000000]
        [--pg-url postgres://postgres@127.0.0.1:5432] [--keep-db] [--delete 100000]
        [--no-partition]

This process creates the PostgreSQL database ``takt_capacity`` (dropped at
the end unless --keep-db), starts a private redis-server on a free port,
migrates with benchmarks.settings, and runs the measurements in a child
process set up with Takt's settings (infra.base_env). The child prints the
tables and writes them to benchmarks/results/capacity-table.md, rewritten
after each step so that a failure keeps what was measured.

At each step the run table is grown to the step's size by bulk-seeding
more runs (seed_runs' generator over 60 days of history, COPY through
seed_bulk), then: VACUUM (ANALYZE); the sizes of the heap and of every
index; the admin's run list and the API's run list (Django's test client,
a superuser); the writes a run goes through (enqueue_job, the beat's
multi-row insert_runs, the worker's start and end); and the retention
cleanup (delete_expired_runs) of --delete runs. After the last step,
optionally, the same rows in a scratch table partitioned by month on
enqueued_at: the time to detach and drop the oldest month.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import platform
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import median
from time import perf_counter
from typing import Any
from unittest import mock

from benchmarks import infra

DB_NAME = "takt_capacity"
RESULTS = Path(__file__).resolve().parent / "results" / "capacity-table.md"
HISTORY_DAYS = 60  # runs' enqueued_at spread over this many days before the seed's now
RUNS_PER_JOB = 1_000  # jobs = runs / this (at least MIN_JOBS)
MIN_JOBS = 100
HOT_JOBS = 4  # per seeded slice: the busiest jobs, each one run a minute over the history
HOT_RUNS = HISTORY_DAYS * 1440
ENQUEUE_RUNS = 1_000  # runs per repetition through enqueue_job (and the worker's start/end)
BULK_RUNS = 10_000  # runs per repetition through the beat's insert_runs
REPS = 3
WORKER = "celery@capacity-bench"
PART_TABLE = "capacity_part_runs"
SEED = 20261203
SEEDERS = 2  # processes seeding at once (see seed_slice)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000_000, help="the largest size")
    parser.add_argument("--steps", default="", help="sizes measured (default 1M,3M,--runs)")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("--keep-db", action="store_true", help=f"keep the database {DB_NAME}")
    parser.add_argument(
        "--delete", type=int, default=100_000, help="runs the retention cleanup deletes per step"
    )
    parser.add_argument("--no-partition", action="store_true", help="skip the partitioning figure")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, default=0.0, help=argparse.SUPPRESS)
    return parser


def _steps(args: argparse.Namespace) -> list[int]:
    if args.steps:
        steps = sorted({int(s.replace("_", "")) for s in args.steps.split(",") if s.strip()})
    else:
        steps = sorted({s for s in (1_000_000, 3_000_000) if s < args.runs} | {args.runs})
    if not steps or steps[-1] > args.runs:
        raise SystemExit("--steps: sizes up to --runs")
    return steps


# --- the database: created and dropped here (infra's pattern, another name) ---


def _pg_admin(base_url: str) -> Any:
    import psycopg

    return psycopg.connect(f"{base_url}/postgres", autocommit=True, connect_timeout=3)


def create_db(base_url: str) -> str:
    with _pg_admin(base_url) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB_NAME}")
    return f"{base_url}/{DB_NAME}"


def drop_db(base_url: str) -> None:
    try:
        with _pg_admin(base_url) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
    except Exception as exc:
        print(f"could not drop {DB_NAME}: {exc}", file=sys.stderr)


def main() -> None:
    args = _parser().parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    if args.child:
        child(args)
        return
    _steps(args)  # refuse bad steps before creating anything
    started = time.time()
    created = False
    child_proc: subprocess.Popen[bytes] | None = None
    with tempfile.TemporaryDirectory(prefix="takt-capacity-") as tmp:
        work = Path(tmp)
        try:
            db_url = create_db(args.pg_url)
            created = True
            _, redis_url = infra.start_redis(work, work)
            env = infra.base_env(db_url, redis_url, work / "var")
            infra.migrate(env)
            argv = [sys.executable, "-m", "benchmarks.capacity_table", "--child",
                    f"--started={started}", *sys.argv[1:]]  # fmt: skip
            env = {**env, "DJANGO_SETTINGS_MODULE": "benchmarks.settings"}
            child_proc = subprocess.Popen(argv, cwd=infra.ROOT, env=env)
            if child_proc.wait() != 0:
                raise SystemExit(f"the measuring process failed (exit {child_proc.returncode})")
        except KeyboardInterrupt:
            print("interrupted; cleaning up", file=sys.stderr)
        finally:
            if child_proc is not None and child_proc.poll() is None:
                child_proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child_proc.wait(timeout=30)
            infra.stop_all()
            if created and not args.keep_db:
                drop_db(args.pg_url)
            elif created:
                print(f"kept the database {DB_NAME}", file=sys.stderr)
    print(f"took {(time.time() - started) / 60:.1f} min", file=sys.stderr)


# --- the measuring process (Django set up) -------------------------------------


def say(msg: str) -> None:
    print(f"  [capacity {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load() -> float:
    return round(os.getloadavg()[0], 2)


def q(sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(sql, list(params))
        return list(cur.fetchall()) if cur.description else []


def timed_sql(sql: str) -> float:
    from django.db import connection

    with connection.cursor() as cur:
        t0 = perf_counter()
        cur.execute(sql)
        return perf_counter() - t0


@dataclasses.dataclass
class Slice:
    """The jobs of one step's growth: ids lo..hi, seeded when the step comes."""

    lo: int
    hi: int
    nominal: int  # runs planned for it (the step's growth)


@dataclasses.dataclass
class Bench:
    args: argparse.Namespace
    steps: list[int]
    now: datetime
    plans: list[Any] = dataclasses.field(default_factory=list)
    slices: list[Slice] = dataclasses.field(default_factory=list)
    hot_job: int = 0
    res: dict[str, Any] = dataclasses.field(default_factory=dict)


def _sizes(jobs: int, runs: int) -> Any:
    from benchmarks import seed_admin

    return seed_admin.Sizes(jobs=jobs, runs=runs, periodic_tasks=0,
                            hot_runs=min(HOT_RUNS, runs // 10), hot_jobs=HOT_JOBS)  # fmt: skip


def seed_jobs(b: Bench) -> None:
    """Every job of every step at once (ids 1..J), with the run counts each
    step will seed (seed_runs.plan_run_counts per slice): job rows and
    triggers by seed_admin.plan_jobs; a job's runs come with its step."""
    from benchmarks import seed_admin, seed_bulk, seed_runs
    from jobs.models import Job, Trigger

    total_jobs = max(MIN_JOBS, b.steps[-1] // RUNS_PER_JOB)
    counts: list[int] = []
    prev_runs, prev_hi = 0, 0
    for i, target in enumerate(b.steps):
        hi = max(prev_hi + 1, round(total_jobs * target / b.steps[-1]))
        s = Slice(prev_hi + 1, hi, target - prev_runs)
        b.slices.append(s)
        counts += seed_runs.plan_run_counts(
            random.Random(SEED + i), _sizes(s.hi - s.lo + 1, s.nominal)
        )
        prev_runs, prev_hi = target, hi
    db = seed_bulk.Backend()
    plans, job_rows, trigger_rows = seed_admin.plan_jobs(random.Random(SEED), counts, b.now, db)
    b.plans = plans
    t0 = perf_counter()
    n_jobs = seed_bulk.insert(Job, seed_admin.JOB_COLUMNS, job_rows)
    n_triggers = seed_bulk.insert(Trigger, seed_admin.TRIGGER_COLUMNS, trigger_rows)
    say(f"{n_jobs:,} jobs, {n_triggers:,} triggers in {perf_counter() - t0:.1f} s")
    b.res["jobs"], b.res["triggers"] = n_jobs, n_triggers


def _shifted(rows: Iterator[tuple[Any, ...]], offset: int) -> Iterator[tuple[Any, ...]]:
    """seed_runs' rows with ids (and retry_of ids) after those already there."""
    from benchmarks import seed_runs

    retry = seed_runs.RUN_COLUMNS.index("retry_of_id")
    for row in rows:
        values = list(row)
        values[0] += offset
        if values[retry] is not None:
            values[retry] += offset
        yield tuple(values)


def _seed_part(plans: list[Any], now_s: float, offset: int, seed: int) -> tuple[int, Any]:
    """One seeding process: the runs of the jobs in `plans` that have runs,
    ids from offset + 1, in one COPY on its own connection. Returns the
    count and the jobs' JobStats (their last run's id as inserted)."""
    from django.db import connection

    from benchmarks import seed_bulk, seed_runs
    from runs.models import Run

    out = seed_runs.RunsSeeded(count=0, hottest=0)
    with mock.patch.object(seed_runs, "SPAN_S", HISTORY_DAYS * 86400):
        rows = seed_runs.run_rows(random.Random(seed), plans, now_s, seed_bulk.Backend(), out)
        n = seed_bulk.insert(Run, seed_runs.RUN_COLUMNS, _shifted(rows, offset))
    for stats in out.stats.values():
        stats.last_id += offset
    connection.close()
    return n, out.stats


def seed_slice(b: Bench, index: int, runs: int) -> tuple[int, float]:
    """`runs` runs of the slice's jobs over the HISTORY_DAYS before b.now
    (seed_runs spreads runs over its SPAN_S, 14 days: patched to the
    history here), with their jobs' heartbeats. SEEDERS processes, each on
    every SEEDERS-th job of the slice with its own id range after the
    table's largest id, COPY at the same time: one process generates rows
    more slowly than PostgreSQL takes them, and the machine has two cores."""
    import multiprocessing

    from django.db import connections

    from benchmarks import seed_bulk, seed_runs
    from runs.models import Run

    s = b.slices[index]
    counts = seed_runs.plan_run_counts(random.Random(SEED + index), _sizes(s.hi - s.lo + 1, runs))
    parts = []
    for k in range(SEEDERS):
        parts.append([
            dataclasses.replace(p, runs=counts[p.id - s.lo]
                                if s.lo <= p.id <= s.hi and (p.id - s.lo) % SEEDERS == k else 0)
            for p in b.plans
        ])  # fmt: skip
    offset = q(f"SELECT coalesce(max(id), 0) FROM {Run._meta.db_table}")[0][0]
    jobs = []
    for k, plans in enumerate(parts):
        jobs.append((plans, b.now.timestamp(), offset, SEED + 1000 + 10 * index + k))
        offset += sum(p.runs for p in plans)
    connections.close_all()  # the forked processes open their own
    t0 = perf_counter()
    # SIGTERM as by default in the pool's processes: the pool ends them with it.
    default = (signal.SIGTERM, signal.SIG_DFL)
    with multiprocessing.get_context("fork").Pool(SEEDERS, signal.signal, default) as pool:
        done = pool.starmap(_seed_part, jobs)
    seconds = perf_counter() - t0
    out = seed_runs.RunsSeeded(count=0, hottest=0)
    for _, stats in done:
        out.stats.update(stats)
    plans = [dataclasses.replace(p, runs=counts[p.id - s.lo] if s.lo <= p.id <= s.hi else 0)
             for p in b.plans]  # fmt: skip
    seed_runs.insert_heartbeats(plans, out, now=b.now, db=seed_bulk.Backend())
    seed_runs.reset_all_sequences()
    if not b.hot_job:
        b.hot_job = max(plans, key=lambda p: (p.runs, -p.id)).id
    return sum(n for n, _ in done), seconds


def run_count() -> int:
    from runs.models import Run

    return int(q(f"SELECT count(*) FROM {Run._meta.db_table}")[0][0])


def sizes() -> dict[str, Any]:
    from runs.models import Run

    t = Run._meta.db_table
    heap, table, indexes, total = q(
        "SELECT pg_relation_size(%s::regclass), pg_table_size(%s::regclass),"
        " pg_indexes_size(%s::regclass), pg_total_relation_size(%s::regclass)",
        [t] * 4,
    )[0]
    per_index = dict(
        q(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
            " WHERE relid = %s::regclass ORDER BY indexrelname",
            [t],
        )
    )
    return {"heap": heap, "table": table, "indexes": indexes, "total": total, "index": per_index}


# --- list pages ----------------------------------------------------------------


def measure_pages(b: Bench, rows: int) -> list[dict[str, Any]]:
    """The admin's run list and the API's, as measure_admin times pages:
    one warm-up request (its SQL captured), then REPS timed requests in
    rounds; each SELECT of the warm-up re-run alone, the slowest one's plan
    summarised."""
    from django.contrib import admin
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from benchmarks import measure_admin
    from runs.admin.filters import COUNT_CAP
    from runs.models import Run

    users = get_user_model().objects
    user = users.filter(username="capacity-admin").first() or users.create_superuser(
        "capacity-admin", "capacity@example.invalid", None
    )
    client = Client(HTTP_HOST="localhost", raise_request_exception=False)
    client.force_login(user)
    per_page = int(admin.site.get_model_admin(Run).list_per_page)
    mid = max(1, min(math.ceil(rows / per_page) // 2, COUNT_CAP // per_page))
    hot_runs = Run.objects.filter(job_id=b.hot_job).count()
    runs = reverse(f"admin:{Run._meta.app_label}_{Run._meta.model_name}_changelist")
    try:
        api = reverse("run-list")
    except Exception:
        api = "/api/v1/runs"
    Page = measure_admin.Page
    pages = [
        Page("admin run list: page 1", runs, "takt"),
        Page(f"admin run list: page {mid}", f"{runs}?p={mid}", "takt"),
        Page(f"admin run list: one job ({hot_runs:,} runs)", f"{runs}?job={b.hot_job}", "takt"),
        Page("admin run list: status failed", f"{runs}?status__exact=failed", "takt"),
        Page("API run list: page 1", api, "takt"),
        Page(f"API run list: one job ({hot_runs:,} runs)", f"{api}?job={b.hot_job}", "takt"),
    ]
    visits = [measure_admin.visit(client, p) for p in pages]
    measure_admin.time_rounds(client, visits, REPS)
    out = []
    for v in visits:
        item: dict[str, Any] = {"label": v.page.label, "url": v.page.url, "status": v.status}
        if v.status == 200:
            timed = measure_admin.rerun(v.statements)
            slowest_ms, slowest_sql = timed[0] if timed else (math.nan, "")
            plan = measure_admin.explain(slowest_sql) if slowest_sql else []
            item.update(
                ms=v.times_ms,
                cpu_ms=v.cpu_ms,
                queries=len(v.statements),
                slowest_ms=slowest_ms,
                plan=measure_admin.plan_summary(plan),
                full_counts=measure_admin.full_counts(v.statements),
            )
            say(f"{v.page.label}: {median(v.times_ms):,.0f} ms (slowest SQL {slowest_ms:,.1f} ms)")
        else:
            say(f"{v.page.label}: HTTP {v.status}")
        out.append(item)
    return out


# --- writes ----------------------------------------------------------------------


def idle_jobs(b: Bench, upto: int) -> list[Any]:
    """The jobs seeded so far that have no queued or running run (and no
    parent): enqueue_job inserts on them in its one-statement path."""
    from jobs.models import Job
    from runs.models import Run, RunStatus

    busy = Run.objects.filter(status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).values("job_id")
    jobs = Job.objects.filter(pk__lte=upto, parent__isnull=True).exclude(pk__in=busy)
    return list(jobs.order_by("pk"))


def _start(run_id: int) -> Any:
    """queued → running as the worker claims a run (runs.execution): the
    one-statement start_plain_run, else load_run and start_run."""
    from django.utils import timezone

    from runs.services import start_run
    from runs.statements import load_run, start_plain_run

    now = timezone.now()
    run = start_plain_run(run_id, worker=WORKER, now=now)
    if run is None:
        run = load_run(run_id)
        if run is None or not start_run(run, worker=WORKER, now=now):
            return None
    return run


def _drop_messages() -> None:
    import redis

    from benchmarks.suite_ctx import QUEUE_KEYS

    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.delete(*QUEUE_KEYS, "unacked", "unacked_index")


def measure_writes(jobs: list[Any]) -> dict[str, Any]:
    """Per repetition: ENQUEUE_RUNS runs through enqueue_job (its insert,
    the publish to Redis after it, the published mark), each started and
    ended as the worker does (start, then finish_run succeeded); in rounds
    over the idle jobs, each round's runs ended before the next round
    enqueues on the same jobs again. Then as many runs through
    statements.insert_run alone (the plain INSERT … RETURNING, without the
    idle check or the publish), and BULK_RUNS through the beat's
    insert_runs in one transaction; those two are deleted again (untimed):
    thousands of runs with one enqueued_at would make the next step's run
    list sort them all on page 1."""
    from django.db import transaction
    from django.utils import timezone

    from runs.ending import finish_run
    from runs.models import Run, RunStatus, RunTrigger
    from runs.services import enqueue_job
    from runs.statements import insert_run, insert_runs

    if not jobs:
        raise RuntimeError("no job without a queued or running run to enqueue on")
    res: dict[str, Any] = {"jobs": len(jobs), "enqueue": [], "start": [], "finish": [],
                           "insert": [], "bulk": [], "not_queued": 0}  # fmt: skip
    for _rep in range(REPS):
        t_enq = t_start = t_fin = 0.0
        done = 0
        while done < ENQUEUE_RUNS:
            chunk = jobs[: ENQUEUE_RUNS - done]
            t0 = perf_counter()
            made = [enqueue_job(job, trigger=str(RunTrigger.API)) for job in chunk]
            t_enq += perf_counter() - t0
            queued = [r.pk for r in made if r.status == RunStatus.QUEUED and not r.held]
            res["not_queued"] += len(made) - len(queued)
            t0 = perf_counter()
            started = [_start(pk) for pk in queued]
            t_start += perf_counter() - t0
            started = [r for r in started if r is not None]
            t0 = perf_counter()
            for run in started:
                finish_run(run, status=str(RunStatus.SUCCEEDED), now=timezone.now(), output="ok\n")
            t_fin += perf_counter() - t0
            done += len(chunk)
        res["enqueue"].append(1000 * t_enq / done)
        res["start"].append(1000 * t_start / done)
        res["finish"].append(1000 * t_fin / done)
        _drop_messages()

        now = timezone.now()
        single = [
            Run(job_id=jobs[i % len(jobs)].pk, trigger=RunTrigger.API, status=RunStatus.QUEUED,
                priority=jobs[i % len(jobs)].priority, params={}, scheduled_for=now,
                enqueued_at=now + timedelta(microseconds=i))
            for i in range(ENQUEUE_RUNS)
        ]  # fmt: skip
        t0 = perf_counter()
        for run in single:
            insert_run(run)
        res["insert"].append(1000 * (perf_counter() - t0) / ENQUEUE_RUNS)
        Run.objects.filter(pk__in=[r.pk for r in single]).delete()

        now = timezone.now()
        bulk = [
            Run(job_id=jobs[i % len(jobs)].pk, trigger=RunTrigger.SCHEDULE,
                status=RunStatus.QUEUED, priority=jobs[i % len(jobs)].priority, params={},
                scheduled_for=now - timedelta(microseconds=i + 1), enqueued_at=now)
            for i in range(BULK_RUNS)
        ]  # fmt: skip
        t0 = perf_counter()
        with transaction.atomic():
            insert_runs(bulk)
        res["bulk"].append(1000 * (perf_counter() - t0) / BULK_RUNS)
        Run.objects.filter(pk__in=[r.pk for r in bulk]).delete()
    say(
        "writes (ms per run: enqueue, start, end, insert_run, insert_runs): "
        + ", ".join(f"{res[k][-1]:.2f}" for k in ("enqueue", "start", "finish", "insert", "bulk"))
    )
    return res


# --- retention ----------------------------------------------------------------------


class _Enough(Exception):
    """Raised from on_batch once the cleanup deleted what it is to delete."""


def cleanup_batch_size() -> int:
    """The batch the hourly maintenance and `manage.py takt_maintenance` use
    (run_maintenance's default)."""
    import inspect

    from runs.maintenance import run_maintenance

    return int(inspect.signature(run_maintenance).parameters["batch"].default)


def measure_cleanup(limit: int) -> dict[str, Any]:
    """delete_expired_runs at the real now (cut-off now - retention), the
    maintenance's batch size, stopped after `limit` runs by on_batch
    raising _Enough (a batch is committed before on_batch is told)."""
    from django.utils import timezone

    from runs.cleanup import Deleted, count_expired_runs, delete_expired_runs

    batch = cleanup_batch_size()
    now = timezone.now()
    t0 = perf_counter()
    expired = count_expired_runs(now=now)
    count_s = perf_counter() - t0
    batch_s: list[float] = []
    last = perf_counter()

    def on_batch(done: Deleted) -> None:
        nonlocal last
        t = perf_counter()
        batch_s.append(t - last)
        last = t
        if done.runs >= limit:
            raise _Enough

    done = Deleted()
    t0 = last = perf_counter()
    with contextlib.suppress(_Enough):
        delete_expired_runs(done, now=now, batch=batch, by="benchmarks.capacity_table",
                            on_batch=on_batch)  # fmt: skip
    seconds = perf_counter() - t0
    say(f"cleanup: {done.runs:,} runs in {done.batches} batches, {seconds:.1f} s")
    return {"expired": expired, "count_s": count_s, "batch": batch, "deleted": done.runs,
            "batches": done.batches, "seconds": seconds, "batch_s": batch_s}  # fmt: skip


# --- partitioning ----------------------------------------------------------------------


def _month(dt: datetime, add: int = 0) -> datetime:
    m = dt.year * 12 + dt.month - 1 + add
    return datetime(m // 12, m % 12 + 1, 1, tzinfo=UTC)


def partition_figure(b: Bench) -> dict[str, Any]:
    """The run table's rows copied into PART_TABLE, partitioned by month on
    enqueued_at, with the run table's indexes (the primary key as
    (id, enqueued_at), the unique ones not unique: a partitioned table's
    unique indexes must hold the partition key); then the oldest month,
    all past retention, detached and dropped. Dropped afterwards."""
    from runs.cleanup import retention_days
    from runs.models import Run

    t = Run._meta.db_table
    out: dict[str, Any] = {}
    first, last = q(f"SELECT min(enqueued_at), max(enqueued_at) FROM {t}")[0]
    q(f"DROP TABLE IF EXISTS {PART_TABLE} CASCADE")
    q(f"CREATE TABLE {PART_TABLE} (LIKE {t} INCLUDING DEFAULTS) PARTITION BY RANGE (enqueued_at)")
    months = []
    m = _month(first)
    while m <= last:
        name = f"{PART_TABLE}_{m:%Y%m}"
        q(f"CREATE TABLE {name} PARTITION OF {PART_TABLE}"
          f" FOR VALUES FROM ('{m.isoformat()}') TO ('{_month(m, 1).isoformat()}')")  # fmt: skip
        months.append((name, m, _month(m, 1)))
        m = _month(m, 1)
    out["partitions"] = len(months)
    out["copy_s"] = timed_sql(f"INSERT INTO {PART_TABLE} SELECT * FROM {t}")
    out["copied"] = q(f"SELECT count(*) FROM {PART_TABLE}")[0][0]
    q("SET maintenance_work_mem = '256MB'")
    t0 = perf_counter()
    q(f"ALTER TABLE {PART_TABLE} ADD PRIMARY KEY (id, enqueued_at)")
    for name, definition in q("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s",
                              [t]):  # fmt: skip
        if name == f"{t}_pkey":
            continue
        sql = re.sub(r"^CREATE (UNIQUE )?INDEX \S+ ON \S+ ",
                     f"CREATE INDEX cpart_{name[:50]} ON {PART_TABLE} ", definition)  # fmt: skip
        q(sql)
    out["index_s"] = perf_counter() - t0
    q("RESET maintenance_work_mem")
    timed_sql(f"ANALYZE {PART_TABLE}")
    out["total"] = sum(
        q("SELECT pg_total_relation_size(%s::regclass)", [name])[0][0] for name, _, _ in months
    )
    cutoff = datetime.now(UTC) - timedelta(days=retention_days())
    name, lo, hi = next(x for x in months if x[2] <= cutoff)
    out.update(name=name, lo=lo, hi=hi)
    out["rows"] = q(f"SELECT count(*) FROM {name}")[0][0]
    out["bytes"] = q("SELECT pg_total_relation_size(%s::regclass)", [name])[0][0]
    out["detach_s"] = timed_sql(f"ALTER TABLE {PART_TABLE} DETACH PARTITION {name}")
    out["drop_s"] = timed_sql(f"DROP TABLE {name}")
    q(f"DROP TABLE {PART_TABLE} CASCADE")
    say(f"partition {name}: {out['rows']:,} rows, detach {out['detach_s'] * 1000:.1f} ms,"
        f" drop {out['drop_s'] * 1000:.1f} ms")  # fmt: skip
    return out


# --- the run ---------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.utils import timezone

    from benchmarks import seed, seed_bulk
    from jobs.models import Job
    from runs.models import Run

    b = Bench(args, _steps(args), now=timezone.now().replace(microsecond=0))
    b.res.update(header(args), steps=[])
    try:
        seed.wipe()  # as measure_admin: the migrations' built-in jobs go too
        seed_jobs(b)
        for i, target in enumerate(b.steps):
            step: dict[str, Any] = {"target": target, "load": {}}
            b.res["steps"].append(step)
            say(f"== step {i + 1}: {target:,} runs")
            before = run_count()
            n, seed_s = seed_slice(b, i, target - before)
            step.update(seeded=n, seed_s=seed_s)
            say(f"seeded {n:,} runs in {seed_s:.1f} s")
            step["vacuum_s"] = timed_sql(f"VACUUM (ANALYZE) {Run._meta.db_table}")
            seed_bulk.analyze()  # every other table too (jobs, triggers, heartbeats)
            rows = run_count()
            step["rows"] = rows
            step["jobs_with_runs"] = q(
                f"SELECT count(*) FROM {Job._meta.db_table} j WHERE EXISTS"
                f" (SELECT 1 FROM {Run._meta.db_table} r WHERE r.job_id = j.id)"
            )[0][0]
            step["load"]["size"] = load()
            step["size"] = sizes()
            say(f"{rows:,} runs: total {step['size']['total'] / 2**20:,.0f} MB")
            step["load"]["pages"] = load()
            step["pages"] = measure_pages(b, rows)
            step["load"]["writes"] = load()
            step["writes"] = measure_writes(idle_jobs(b, b.slices[i].hi))
            step["load"]["cleanup"] = load()
            step["cleanup"] = measure_cleanup(min(args.delete, rows // 10))
            write(b)
        if not args.no_partition:
            b.res["load_partition"] = load()
            b.res["partition"] = partition_figure(b)
    finally:
        b.res["took_s"] = time.time() - (args.started or time.time())
        write(b)
        print(render(b.res))


def header(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=infra.ROOT, capture_output=True, text=True,
                              check=False).stdout.strip()  # fmt: skip

    settings = dict(
        q(
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN"
            " ('shared_buffers', 'work_mem', 'maintenance_work_mem', 'max_wal_size',"
            " 'effective_cache_size', 'random_page_cost', 'autovacuum')"
        )
    )
    argv = [a for a in sys.argv[1:] if a != "--child" and not a.startswith("--started")]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "cpus": os.cpu_count(),
        "ram_gb": psutil.virtual_memory().total / 2**30,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "pg": q("SELECT version()")[0][0],
        "pg_settings": settings,
        "command": " ".join([".venv/bin/python -m benchmarks.capacity_table", *argv]),
    }


def write(b: Bench) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(render(b.res))


# --- the report ---------------------------------------------------------------------------


def _mb(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def _med(values: list[float]) -> float:
    return median(values) if values else math.nan


def _n(x: float, digits: int = 2) -> str:
    if x != x:  # NaN
        return "–"
    return f"{x:,.{digits}f}"


def render(res: dict[str, Any]) -> str:
    steps = [s for s in res.get("steps", []) if "cleanup" in s]  # the complete steps
    lines: list[str] = []
    add = lines.append
    biggest = steps[-1]["rows"] if steps else 0
    add(f"## Run table capacity on PostgreSQL, up to {biggest:,} runs")
    add("")
    dirty = " (plus uncommitted changes)" if res.get("dirty") else ""
    add(f"Measured {res.get('date')} at commit `{res.get('commit')}`{dirty} with "
        f"`{res.get('command')}`"
        + (f", which took {res['took_s'] / 60:.1f} min." if res.get("took_s") else "."))  # fmt: skip
    add("")
    pgs = ", ".join(f"{k} {v}" for k, v in sorted(res.get("pg_settings", {}).items()))
    add(f"Machine: {res.get('cpus')} cores, {res.get('ram_gb', 0):.0f} GB RAM, "
        f"{res.get('platform')}, Python {res.get('python')}. {res.get('pg')}; the server's "
        f"settings (as this machine has them; nothing was changed for the run): {pgs}. Another process (benchmarks of the lead) may have "
        "been running on the same two cores: the 1-minute load average is given with every "
        "figure (it lags: those taken just after the seeding still count its processes).")  # fmt: skip
    add("")
    if not steps:
        add("(no step finished)")
        return "\n".join(lines) + "\n"
    heads = " | ".join(f"{s['rows']:,} runs" for s in steps)
    sep = "|---" * (len(steps) + 1) + "|"

    add("### Data set")
    add("")
    add(
        f"Jobs and triggers are seed_admin's ({res.get('jobs', 0):,} jobs, "
        f"{res.get('triggers', 0):,} triggers, ids in slices: each step's growth goes to its "
        f"own jobs, about one job per {RUNS_PER_JOB:,} runs). Each step grows the run table to "
        "its size with seed_runs' generator (the status mix of the admin benchmark: 88.5 % "
        "succeeded, 6 % failed, …; retries, catch-ups, manual and API runs; "
        f"{HOT_JOBS} jobs per step with one run a minute) over the {HISTORY_DAYS} days before "
        "the seed's start (seed_runs.SPAN_S patched from 14 days), COPY'd into the indexed "
        f"table by seed_bulk, {SEEDERS} processes at once (the step's jobs dealt out between "
        "them, each with its own range of ids after the table's largest, one transaction): the "
        "heap holds per step that many interleaved streams, each in time order. With TAKT_RETENTION_DAYS 14 about "
        f"{(HISTORY_DAYS - 14) / HISTORY_DAYS:.0%} of the runs are past retention. Each step "
        "then ran VACUUM (ANALYZE) on the run table (and ANALYZE on the rest) before measuring."
    )
    add("")
    add("| step | " + heads + " |")
    add(sep)
    add("| runs seeded in this step | " + " | ".join(f"{s['seeded']:,}" for s in steps) + " |")
    add("| seeding time (s) | " + " | ".join(f"{s['seed_s']:.1f}" for s in steps) + " |")
    add("| seeding µs per run | "
        + " | ".join(f"{1e6 * s['seed_s'] / max(s['seeded'], 1):.0f}" for s in steps) + " |")  # fmt: skip
    add("| VACUUM (ANALYZE) of the run table (s) | "
        + " | ".join(f"{s['vacuum_s']:.1f}" for s in steps) + " |")  # fmt: skip
    add("| jobs with runs | " + " | ".join(f"{s['jobs_with_runs']:,}" for s in steps) + " |")
    add("| runs past retention | "
        + " | ".join(f"{s['cleanup']['expired']:,}" if "cleanup" in s else "–" for s in steps)
        + " |")  # fmt: skip
    add("")

    add("### 1. Size")
    add("")
    add(
        "pg_relation_size of the heap (main fork) and of each index (pg_stat_user_indexes of "
        "the run table), pg_table_size − heap (TOAST, free space map, visibility map), "
        "pg_indexes_size and pg_total_relation_size, in MiB, after VACUUM (ANALYZE), with "
        "count(*) of the rows at that moment; bytes per run = size ÷ rows. The runs were "
        "COPY'd into a table that had its indexes (no index built after the load), so the "
        "indexes' pages are as full as row-by-row inserts leave them."
    )
    add("")
    add("| MiB | " + heads + " | bytes per run (last) |")
    add(sep + "---|")
    last = steps[-1]

    def size_row(label: str, get: Any) -> None:
        per = get(last) / last["rows"]
        add(f"| {label} | " + " | ".join(_mb(get(s)) for s in steps) + f" | {per:,.0f} |")

    size_row("heap", lambda s: s["size"]["heap"])
    size_row("TOAST, FSM, VM", lambda s: s["size"]["table"] - s["size"]["heap"])
    names = sorted(last["size"]["index"], key=lambda n: -last["size"]["index"][n])
    for name in names:
        size_row(f"index `{name}`", lambda s, n=name: s["size"]["index"].get(n, 0))
    size_row("**all indexes**", lambda s: s["size"]["indexes"])
    size_row("**total**", lambda s: s["size"]["total"])
    add("| load average | " + " | ".join(f"{s['load']['size']}" for s in steps) + " | |")
    add("")

    add("### 2. Writes per run")
    add("")
    add(
        f"Milliseconds per run, median of {REPS} repetitions (each value in brackets). "
        f"**enqueue_job**: runs.services.enqueue_job(job, trigger='api') for {ENQUEUE_RUNS:,} "
        "runs, on the step's jobs that had no queued or running run (in rounds over them when "
        "there are fewer jobs than runs): its INSERT … WHERE NOT EXISTS (the job's active "
        "runs, the queue state), and the publish after it (the Celery message to the private "
        "Redis, the delivery mark in Redis, the UPDATE of published_at). **start** and "
        "**end**: each of those runs then went queued → running as the worker claims it "
        "(statements.start_plain_run, else load_run + services.start_run) and running → "
        "succeeded through ending.finish_run (with the heartbeat statement that goes with "
        f"it). **insert_run alone**: {ENQUEUE_RUNS:,} queued runs through "
        "statements.insert_run (the INSERT … RETURNING id that enqueue_job's general path "
        "sends, without the idle check and the publish): the part of enqueue_job that the "
        f"table's size can change. **insert_runs**: the beat's multi-row INSERT "
        f"(statements.insert_runs, {BULK_RUNS:,} scheduled runs in statements of 500 rows, "
        "one transaction, as runs.dispatch does). The runs of these two were deleted again "
        "(untimed). Django connection in autocommit, as in the processes."
    )
    add("")
    add("| ms per run | " + heads + " |")
    add(sep)
    for key, label in (("enqueue", "enqueue_job (insert + publish)"),
                       ("start", "start (queued → running)"),
                       ("finish", "end (running → succeeded)"),
                       ("insert", "insert_run alone (one INSERT)"),
                       ("bulk", "beat insert_runs (multi-row)")):  # fmt: skip
        add(f"| {label} | " + " | ".join(
            f"{_n(_med(s['writes'][key]), 3)} ({', '.join(_n(v, 3) for v in s['writes'][key])})"
            for s in steps) + " |")  # fmt: skip
    add("| idle jobs used | " + " | ".join(f"{s['writes']['jobs']:,}" for s in steps) + " |")
    add("| load average | " + " | ".join(f"{s['load']['writes']}" for s in steps) + " |")
    if any(s["writes"]["not_queued"] for s in steps):
        add("")
        add("Runs that enqueue_job did not queue (skipped or held): "
            + ", ".join(f"{s['writes']['not_queued']}" for s in steps) + ".")  # fmt: skip
    add("")

    add("### 3. Retention cleanup")
    add("")
    batch = last["cleanup"]["batch"]
    add(
        "runs.cleanup.delete_expired_runs(now=the real now, batch="
        f"{batch:,} — run_maintenance's default, which the hourly maintenance job and "
        "`manage.py takt_maintenance` use), stopped once it had deleted the number below: its "
        "on_batch callback raises a private exception after the batch that reaches it (each "
        "batch is committed before on_batch is told). So the runs deleted are the oldest "
        "(lowest ids) of the table, after VACUUM, with the rest of the table past retention "
        "too. Each batch: SELECT the next ids (primary key order, filtered on status and "
        "finished_at), INSERT its audit row, then Django's collector: a SELECT of the batch's "
        "runs with all their columns, an UPDATE each setting cause and retry_of to NULL where "
        "they point into the batch, DELETEs of 100 ids each, COMMIT. count_expired_runs is what a "
        "cleanup with progress (the maintenance job) asks first. The table was grown back "
        "to the next step's size by the next step's seeding."
    )
    add("")
    add("| | " + heads + " |")
    add(sep)
    add("| runs deleted | " + " | ".join(f"{s['cleanup']['deleted']:,}" for s in steps) + " |")
    add("| batches | " + " | ".join(f"{s['cleanup']['batches']:,}" for s in steps) + " |")
    add("| seconds | " + " | ".join(f"{s['cleanup']['seconds']:.1f}" for s in steps) + " |")
    add("| **s per 1,000 runs deleted** | " + " | ".join(
        _n(1000 * s["cleanup"]["seconds"] / max(s["cleanup"]["deleted"], 1), 3)
        for s in steps) + " |")  # fmt: skip

    def batch_ms(s: dict[str, Any], part: slice) -> str:
        b = s["cleanup"]["batch_s"][part]
        return _n(1000 * median(b), 0) if b else "–"

    add("| batch time, median of the first 10 (ms) | "
        + " | ".join(batch_ms(s, slice(0, 10)) for s in steps) + " |")  # fmt: skip
    add("| batch time, median of the last 10 (ms) | "
        + " | ".join(batch_ms(s, slice(-10, None)) for s in steps) + " |")  # fmt: skip
    add("| count_expired_runs (s) | "
        + " | ".join(f"{s['cleanup']['count_s']:.2f}" for s in steps) + " |")  # fmt: skip
    add("| load average | " + " | ".join(f"{s['load']['cleanup']}" for s in steps) + " |")
    add("")

    add("### 4. List pages")
    add("")
    add(
        "Server time in ms of a page, median of the timed requests (n in brackets), with "
        "Django's test client in the measuring process, logged in as a superuser, DEBUG off "
        "(measure_admin.visit and time_rounds: one warm-up request whose SQL is captured, "
        f"then {REPS} timed requests per page in rounds over the pages). The URLs: the Run "
        "admin's changelist (reversed), its middle page (the run list counts at most "
        "COUNT_CAP runs, so its deepest page), filtered by the first step's busiest job, "
        "filtered by status failed; the API's run list (reverse('run-list')) page 1 and "
        "filtered by the same job. SQL: the slowest SELECT of the warm-up request, re-run "
        "alone with its rows fetched (measure_admin.rerun): the part of the page that the "
        "table's size can change; the rest is Django rendering the page."
    )
    add("")
    add("| page: ms (n; slowest SQL ms) | " + heads + " |")
    add(sep)
    for k, page in enumerate(last["pages"]):
        label = re.sub(r" \([\d,]+ runs\)", "", page["label"])
        cells = []
        for s in steps:
            p = s["pages"][k] if k < len(s["pages"]) else {}
            if p.get("ms"):
                cells.append(
                    f"{_n(_med(p['ms']), 0)} (n={len(p['ms'])}; SQL {_n(p['slowest_ms'], 1)})"
                )
            else:
                cells.append(f"HTTP {p.get('status', '?')}")
        add(f"| {label} | " + " | ".join(cells) + " |")
    add("| load average | " + " | ".join(f"{s['load']['pages']}" for s in steps) + " |")
    add("")
    add("The slowest statement's plan at the last step (EXPLAIN ANALYZE, summarised), and "
        "the tables a page counted whole:")  # fmt: skip
    add("")
    for page in last["pages"]:
        if page.get("plan") is not None and page.get("status") == 200:
            counts = ", ".join(page.get("full_counts") or []) or "none"
            add(f"- {page['label']} (`{page['url']}`, {page.get('queries')} statements): "
                f"{page['plan'] or '–'}; counted whole: {counts}")  # fmt: skip
    add("")

    part = res.get("partition")
    add("### 5. Partitioning by month")
    add("")
    if not part:
        add("Not measured in this run (--no-partition, or it did not finish).")
        add("")
        return "\n".join(lines) + "\n"
    rate = last["cleanup"]["seconds"] / max(last["cleanup"]["deleted"], 1)
    estimate = rate * part["rows"]
    add(
        f"After the last step, the run table's {part['copied']:,} "
        f"rows were copied (INSERT … SELECT, {part['copy_s']:.0f} s) into a scratch table "
        f"`{PART_TABLE}` created LIKE the run table, PARTITION BY RANGE (enqueued_at), one "
        f"partition per calendar month ({part['partitions']}); then the run table's indexes "
        f"were created on it ({part['index_s']:.0f} s; primary key (id, enqueued_at), the "
        "unique indexes not unique, since a partitioned table's unique indexes must contain "
        "the partition key). The oldest partition lies wholly past retention: it was "
        "detached (ALTER TABLE … DETACH PARTITION) and dropped (DROP TABLE), each timed "
        "alone. The batched DELETE of the same rows is not measured but extrapolated from "
        f"section 3's rate at the last step ({_n(1000 * rate, 3)} s per 1,000 runs): an "
        f"estimate, since the rate was measured on the oldest {last['cleanup']['deleted']:,} "
        "runs only. The scratch "
        "table was dropped afterwards."
    )
    add("")
    add("| | value |")
    add("|---|---|")
    add(
        f"| partition dropped | `{part['name']}` ({part['lo']:%Y-%m-%d} to {part['hi']:%Y-%m-%d}) |"
    )
    add(f"| its runs | {part['rows']:,} |")
    add(f"| its size with its indexes (MiB) | {_mb(part['bytes'])} |")
    add(f"| all partitions with indexes (MiB) | {_mb(part['total'])} |")
    add(f"| DETACH PARTITION (ms) | {_n(part['detach_s'] * 1000, 1)} |")
    add(f"| DROP TABLE (ms) | {_n(part['drop_s'] * 1000, 1)} |")
    add(f"| delete_expired_runs of as many runs, extrapolated (s) | {estimate:,.0f} |")
    add(f"| load average | {res.get('load_partition')} |")
    add("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
