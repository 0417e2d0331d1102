"""Runs and heartbeats of the admin benchmark's jobs (see seed_admin.py).

How many runs each job has is skewed: a quarter of the jobs never ran, the
`hot_jobs` busiest have `hot_runs` each (50,000 in the full profile: one
every 24 s over the 14 days), the others share the rest by a Pareto draw
(most have a handful, a few thousands). A job's runs sit on its own grid
over the last 14 days, so (job, scheduled_for) stays unique as the
database demands. Statuses: 88.5 % succeeded, 6 % failed, 3 % skipped, 1 %
timed_out, 1 % cancelled, 0.5 % lost, and the last run of 1 % of the jobs
still queued or running. Triggers: mostly schedule; manual, api and
catch-up runs; a failed run of a job with retries is followed by its retry.

All runs of all jobs are merged into time order before they get their ids,
as a real installation writes them (the table's physical order then
follows enqueued_at, which PostgreSQL's planner weighs).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchmarks import seed_bulk
from heartbeats.models import Heartbeat
from jobs.models import Job, Trigger
from runs.models import Run

SPAN_S = 14 * 86400
STATUSES = ((0.885, "succeeded"), (0.945, "failed"), (0.975, "skipped"), (0.985, "timed_out"),
            (0.995, "cancelled"), (1.0, "lost"))  # fmt: skip
STARTED = frozenset({"succeeded", "failed", "timed_out", "lost", "running"})
MESSAGES = {
    "failed": "RuntimeError: upstream answered 503",
    "timed_out": "timed out after 300 s",
    "skipped": "skipped: the job's previous run is still running (overlap policy skip)",
    "cancelled": "cancelled by admin",
    "lost": "lost: its worker stopped without recording an end",
}
FAILED_OUTPUT = ("fetching the upstream report\nTraceback (most recent call last):\n"
                 '  File "tasks.py", line 42, in run\nRuntimeError: upstream answered 503\n')  # fmt: skip
WORKERS = tuple(f"celery@worker-{i}" for i in range(1, 5))
RUN_COLUMNS = ("id", "job_id", "source_trigger_id", "trigger", "status", "priority", "params",
               "scheduled_for", "enqueued_at", "published_at", "started_at", "finished_at",
               "duration_s", "attempt", "worker", "result", "message", "output", "missed_count",
               "dedupe_key", "cancelled_by", "retry_of_id")  # fmt: skip
HEARTBEAT_COLUMNS = ("name", "job_id", "last_run_at", "last_success_at", "last_started_at",
                     "last_status", "last_run_id", "run_count", "failure_count",
                     "consecutive_failures", "state", "updated_at")  # fmt: skip


@dataclass
class JobStats:
    """A job's run history as its heartbeat sums it up (times: epoch s)."""

    count: int = 0
    failures: int = 0
    consecutive: int = 0
    last_id: int = 0
    last_status: str = ""
    last_started: float | None = None
    last_finished: float | None = None
    last_success: float | None = None


@dataclass
class RunsSeeded:
    count: int
    hottest: int  # the id of a job with the most runs
    stats: dict[int, JobStats] = field(default_factory=dict)

    def last_run_of(self, job_id: int) -> int:
        return self.stats[job_id].last_id


def plan_run_counts(rng: random.Random, sizes: Any) -> list[int]:
    """Runs per job (index = job id - 1), summing to exactly `sizes.runs`."""
    n = sizes.jobs
    order = list(range(n))
    rng.shuffle(order)
    ran = order[: n * 3 // 4]
    hot, rest = ran[: sizes.hot_jobs], ran[sizes.hot_jobs :]
    cap = max(1, sizes.hot_runs // 5)  # the hot jobs stay the busiest
    counts = [0] * n
    for i in hot:
        counts[i] = sizes.hot_runs
    left = sizes.runs - sizes.hot_jobs * sizes.hot_runs
    if left < len(rest):
        raise ValueError(f"{sizes}: too few runs for every job that ran to have one")
    weights = [min(rng.paretovariate(1.1), 1000.0) for _ in rest]
    scale = left / sum(weights)
    for i, w in zip(rest, weights, strict=True):
        counts[i] = max(1, min(cap, int(w * scale)))
    diff, k = left - sum(counts[i] for i in rest), 0
    while diff:  # round-robin correction of the rounding, within 1..cap
        i = rest[k % len(rest)]
        step = 1 if diff > 0 else -1
        if 1 <= counts[i] + step <= cap:
            counts[i] += step
            diff -= step
        k += 1
    return counts


def _job_runs(rng: random.Random, plan: Any, now_s: float) -> Iterator[tuple[Any, ...]]:
    """One job's runs in time order: (enqueued_s, job id, scheduled_s,
    trigger, status, duration_s, attempt, missed)."""
    count = plan.runs
    step = max(1, SPAN_S // count)
    typical_s = min(rng.lognormvariate(0.7, 1.5), 250.0, step / 2)
    first = now_s - SPAN_S + rng.randrange(step)
    busy = rng.random() < 0.01
    prev_status, prev_end, attempt = "", 0.0, 1
    for k in range(count):
        sched = first + k * step
        duration = typical_s * rng.lognormvariate(0, 0.3)
        missed, enqueued = 0, sched + 0.004
        if prev_status == "failed" and attempt <= plan.max_retries:
            trigger, attempt = "retry", attempt + 1
            sched = enqueued = min(prev_end + 10.0 * 2 ** (attempt - 2), now_s - 0.5)
        else:
            attempt, roll = 1, rng.random()
            if plan.trigger_id is None:
                trigger = "manual" if roll < 0.6 else "api"
            else:
                trigger = ("schedule" if roll < 0.93 else "manual" if roll < 0.96
                           else "api" if roll < 0.98 else "catchup")  # fmt: skip
            if trigger in ("manual", "api"):
                sched = enqueued = sched + rng.uniform(0, step / 2)
            elif trigger == "catchup":
                missed, enqueued = rng.randrange(4), sched + rng.uniform(60, 600)
        enqueued = min(enqueued, now_s - 0.5)  # a manual or catch-up run near the end
        sched = min(sched, enqueued)
        roll = rng.random()
        status = next(s for p, s in STATUSES if roll < p)
        if busy and k == count - 1:
            sched = enqueued = max(sched, now_s - rng.uniform(1, 60))
            status = "running" if rng.random() < 0.7 else "queued"
        if status == "timed_out":
            duration = 300.0
        prev_status, prev_end = status, enqueued + duration
        yield enqueued, plan.id, sched, trigger, status, duration, attempt, missed


def run_rows(rng: random.Random, plans: list[Any], now_s: float, db: seed_bulk.Backend,
             out: RunsSeeded) -> Iterator[tuple[Any, ...]]:  # fmt: skip
    """Every run as a row of RUN_COLUMNS, ids in time order; fills `out`."""
    streams = [_job_runs(rng, p, now_s) for p in plans if p.runs]
    t = db.epoch
    run_id = 0
    for enqueued, job_id, sched, trigger, status, duration, attempt, missed in heapq.merge(
        *streams
    ):
        run_id += 1
        plan, st = plans[job_id - 1], out.stats.setdefault(job_id, JobStats())
        published = None if status == "skipped" else enqueued + 0.002 + rng.random() * 0.01
        started = finished = None
        if status in STARTED or (status == "cancelled" and rng.random() < 0.5):
            started = (published or enqueued) + 0.005 + rng.random() * 0.05
        if status not in ("running", "queued"):
            finished = (started + duration) if started else enqueued + rng.uniform(0, 5)
            if status == "lost":
                finished += 600
        ok = status == "succeeded"
        rows_done = rng.randrange(10_000) if ok else 0
        yield (
            run_id, job_id, None if trigger in ("manual", "api") else plan.trigger_id, trigger,
            status, plan.priority, "{}", t(sched), t(enqueued),
            None if published is None else t(published), None if started is None else t(started),
            None if finished is None else t(finished),
            None if started is None or finished is None else finished - started, attempt,
            rng.choice(WORKERS) if started else "",
            db.json({"rows": rows_done}) if ok and rows_done % 3 == 0 else None,
            MESSAGES.get(status, ""),
            f"processed {rows_done} rows\n" if ok else FAILED_OUTPUT if status == "failed" else "",
            missed, f"api-{run_id}" if trigger == "api" and run_id % 2 else "",
            "admin" if status == "cancelled" else "",
            st.last_id if trigger == "retry" else None,
        )  # fmt: skip
        st.count += 1
        st.failures += status in ("failed", "timed_out")
        st.consecutive = st.consecutive + 1 if status in ("failed", "timed_out") else 0
        st.last_id, st.last_status = run_id, status
        st.last_started, st.last_finished = started, finished
        if ok:
            st.last_success = finished
    out.count = run_id


def insert_runs(rng: random.Random, plans: list[Any], *, now: datetime,
                db: seed_bulk.Backend) -> RunsSeeded:  # fmt: skip
    hottest = max(plans, key=lambda p: (p.runs, -p.id)).id
    out = RunsSeeded(count=0, hottest=hottest)
    seed_bulk.insert(Run, RUN_COLUMNS, run_rows(rng, plans, now.timestamp(), db, out))
    return out


def insert_heartbeats(plans: list[Any], runs: RunsSeeded, *, now: datetime,
                      db: seed_bulk.Backend) -> int:  # fmt: skip
    """A heartbeat for every job that ran, as its runs left it."""

    def t(seconds: float | None) -> Any:
        return None if seconds is None else db.epoch(seconds)

    rows = []
    for job_id, st in sorted(runs.stats.items()):
        state = ("running" if st.last_status == "running" else
                 "down" if st.consecutive >= 3 else "up")  # fmt: skip
        rows.append((plans[job_id - 1].name, job_id, t(st.last_finished or st.last_started),
                     t(st.last_success), t(st.last_started), st.last_status, st.last_id,
                     st.count, st.failures, st.consecutive, state, db.time(now)))  # fmt: skip
    return seed_bulk.insert(Heartbeat, HEARTBEAT_COLUMNS, rows)


def reset_all_sequences() -> None:
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
    )

    seed_bulk.reset_sequences(
        [Job, Trigger, Run, Heartbeat, PeriodicTask, CrontabSchedule, IntervalSchedule,
         ClockedSchedule]
    )  # fmt: skip
