"""The admin benchmark's data set, the same on every run (fixed random seed)
and on both databases: `Sizes.jobs` Takt jobs with their triggers, their
runs over the last 14 days with heartbeats (seed_runs.py), and as many
django-celery-beat PeriodicTasks with their schedules.

Jobs: names like "billing export invoices #123" (12 domains × 10 actions ×
10 nouns: a search for one noun matches about a tenth), 85 % enabled, 1 %
paused, 3 % declared in code, 90 % on queue "takt". Triggers: one per job,
a second for 15 %, none for 5 % (run by hand or API only); 60 % cron, 32 %
interval, 4 % once (half of them fired), 4 % calendar presets; 5 % of the
triggers disabled. next_run_at is computed by the pure core, as a save
would. A PeriodicTask mirrors each job's first trigger (crontab, interval
or clocked; a job without triggers gets a daily crontab).
"""

from __future__ import annotations

import random
import time as clock
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from functools import cache
from typing import Any

from django.conf import settings

from benchmarks import seed_bulk, seed_runs
from jobs.core import triggers as core
from jobs.core.presets import CalendarRule, CalendarSpec
from jobs.models import Job, Trigger

SEED = 20261130
DOMAINS = ("billing", "reports", "crm", "etl", "mail", "search", "backup", "inventory",
           "payroll", "analytics", "audit", "shipping")  # fmt: skip
ACTIONS = ("sync", "export", "import", "cleanup", "digest", "refresh", "reindex", "rollup",
           "notify", "archive")  # fmt: skip
NOUNS = ("invoices", "orders", "customers", "events", "sessions", "metrics", "tickets", "users",
         "files", "ledgers")  # fmt: skip
SEARCH_TERM = "invoices"
OWNERS = ("team-core", "team-data", "team-ops", "team-web", "")
CRONS = ("*/5 * * * *", "0 * * * *", "*/15 * * * *", "30 2 * * *", "0 9 * * MON-FRI",
         "15 */6 * * *", "0 0 1 * *", "0 3 * * SUN", "*/30 * * * * *", "0 */2 * * *")  # fmt: skip
ZONES = ("", "", "", "Europe/Berlin", "America/New_York", "Asia/Tokyo")
INTERVALS_S = (30, 60, 300, 600, 900, 3600, 21600, 86400)
CALENDARS = ((CalendarRule.DAILY, time(6, 0), None), (CalendarRule.MONTH_END, time(23, 0), None),
             (CalendarRule.DAY_OF_MONTH, time(7, 30), 15),
             (CalendarRule.QUARTER_START, time(5, 0), None))  # fmt: skip
TRIGGER_COLUMNS = ("id", "job_id", "kind", "enabled", "cron_expression", "timezone",
                   "interval_seconds", "interval_anchor", "start_at", "run_at", "calendar_rule",
                   "at_time", "day_of_month", "next_run_at", "active", "last_fired_at",
                   "created_at", "updated_at")  # fmt: skip
JOB_COLUMNS = ("id", "name", "key", "description", "enabled", "target", "queue", "priority",
               "max_retries", "paused", "pause_note", "paused_at", "paused_by", "code_managed",
               "owner", "runs_done", "created_at", "updated_at")  # fmt: skip


@dataclass(frozen=True)
class Sizes:
    jobs: int
    runs: int
    periodic_tasks: int
    hot_runs: int  # runs of each of the HOT_JOBS busiest jobs
    hot_jobs: int = 4


@dataclass(slots=True)
class JobPlan:
    """What the run generator and the PeriodicTask mirror need of a job."""

    id: int
    name: str
    target: str
    enabled: bool
    priority: int
    max_retries: int
    runs: int = 0
    trigger_id: int | None = None  # its first trigger: the runs' source_trigger
    schedule: tuple[Any, ...] = ("none",)  # the first trigger, for the PeriodicTask


@dataclass
class Seeded:
    """What the page list needs to know about the data set."""

    sizes: Sizes
    now: datetime
    hot_job_id: int
    hot_run_id: int  # the latest run of the hot job
    seconds: dict[str, tuple[int, float]] = field(default_factory=dict)  # what -> (rows, s)


@cache
def _first_fire(spec: Any, now: datetime) -> datetime | None:
    return core.compute_first_fire(spec, now=now)


@cache
def _cron(expression: str) -> str:
    return core.normalize_cron(expression)


def _trigger(rng: random.Random, job: JobPlan, trigger_id: int, created: datetime,
             now: datetime, db: seed_bulk.Backend) -> tuple[tuple[Any, ...], tuple[Any, ...]]:  # fmt: skip
    """One trigger row, and the schedule a PeriodicTask mirrors."""
    enabled = rng.random() >= 0.05
    tz = rng.choice(ZONES)
    zone = tz or settings.TIME_ZONE
    cron = seconds = anchor = start_at = run_at = rule = at = day = last_fired = None
    kind_roll = rng.random()
    if kind_roll < 0.60:
        kind, cron = "cron", _cron(rng.choice(CRONS))
        next_at, schedule = _first_fire(core.CronSpec(cron, zone), now), ("cron", cron, zone)
    elif kind_roll < 0.92:
        kind, seconds = "interval", rng.choice(INTERVALS_S)
        anchor = "fixed_rate" if rng.random() < 0.8 else "from_finish"
        start_at = created
        spec = core.IntervalSpec(
            timedelta(seconds=seconds), core.IntervalAnchor(anchor), start_at, zone
        )
        next_at, schedule = core.compute_first_fire(spec, now=now), ("interval", seconds)
    elif kind_roll < 0.96:
        kind = "once"
        if rng.random() < 0.5:
            run_at = now + timedelta(seconds=rng.uniform(3600, 30 * 86400))
            next_at = run_at
        else:
            run_at = now - timedelta(seconds=rng.uniform(86400, 13 * 86400))
            next_at, last_fired = None, run_at
        schedule = ("once", run_at)
    else:
        kind = "calendar"
        rule, at, day = rng.choice(CALENDARS)
        next_at = _first_fire(CalendarSpec(rule, at, zone, day), now)
        schedule = ("calendar", rule, at, day)
    if next_at is not None and kind != "once":
        last_fired = next_at - timedelta(seconds=seconds or 3600)
    active = enabled and job.enabled
    row = (trigger_id, job.id, kind, enabled, cron or "", tz, seconds, anchor or "fixed_rate",
           db.time(start_at), db.time(run_at), rule or "", db.clock(at), day, db.time(next_at),
           active, db.time(last_fired), db.time(created), db.time(created))  # fmt: skip
    return row, schedule


def plan_jobs(rng: random.Random, run_counts: list[int], now: datetime, db: seed_bulk.Backend
              ) -> tuple[list[JobPlan], list[tuple[Any, ...]], list[tuple[Any, ...]]]:  # fmt: skip
    """The job plans, job rows and trigger rows (ids from 1); job id i has
    run_counts[i - 1] runs."""
    plans, job_rows, trigger_rows = [], [], []
    trigger_id = 0
    for job_id, runs in enumerate(run_counts, start=1):
        domain, action, noun = rng.choice(DOMAINS), rng.choice(ACTIONS), rng.choice(NOUNS)
        plan = JobPlan(id=job_id, name=f"{domain} {action} {noun} #{job_id}",
                       target=f"{domain}.{action}", enabled=rng.random() < 0.85,
                       priority=rng.choice((5, 5, 5, 3, 7, 0)),
                       max_retries=rng.choice((0, 0, 0, 0, 3)), runs=runs)  # fmt: skip
        created = now - timedelta(seconds=rng.uniform(15 * 86400, 400 * 86400))
        paused = plan.enabled and rng.random() < 0.01
        code = rng.random() < 0.03
        n_triggers = 0 if rng.random() < 0.05 else (2 if rng.random() < 0.15 else 1)
        for i in range(n_triggers):
            trigger_id += 1
            row, schedule = _trigger(rng, plan, trigger_id, created, now, db)
            trigger_rows.append(row)
            if i == 0:
                plan.trigger_id, plan.schedule = trigger_id, schedule
        job_rows.append((
            job_id, plan.name, f"{domain}.{action}.{noun}.{job_id}" if code else None,
            f"{action.capitalize()} the {domain} {noun}." if rng.random() < 0.7 else "",
            plan.enabled, plan.target,
            "takt" if rng.random() < 0.9 else rng.choice(("reports", "etl")),
            plan.priority, plan.max_retries, paused,
            "waiting for the upstream fix" if paused else "",
            db.time(now - timedelta(days=2)) if paused else None, "ops" if paused else "",
            code, rng.choice(OWNERS), runs, db.time(created), db.time(created),
        ))  # fmt: skip
        plans.append(plan)
    return plans, job_rows, trigger_rows


def seed(sizes: Sizes, *, now: datetime, say: Any = print) -> Seeded:
    """Fill the (empty) database; returns what the pages need and how long
    each part took. `now` is the end of the 14 days of run history."""
    from benchmarks import seed_dcb

    rng = random.Random(SEED)
    db = seed_bulk.Backend()
    seconds: dict[str, tuple[int, float]] = {}

    t0 = clock.monotonic()
    plans, job_rows, trigger_rows = plan_jobs(rng, seed_runs.plan_run_counts(rng, sizes), now, db)
    n_jobs = seed_bulk.insert(Job, JOB_COLUMNS, job_rows)
    n_triggers = seed_bulk.insert(Trigger, TRIGGER_COLUMNS, trigger_rows)
    seconds["jobs and triggers"] = (n_jobs + n_triggers, clock.monotonic() - t0)
    say(
        f"admin: {n_jobs:,} jobs, {n_triggers:,} triggers in {seconds['jobs and triggers'][1]:.1f} s"
    )

    t0 = clock.monotonic()
    runs = seed_runs.insert_runs(rng, plans, now=now, db=db)
    seconds["runs"] = (runs.count, clock.monotonic() - t0)
    say(f"admin: {runs.count:,} runs in {seconds['runs'][1]:.1f} s")
    t0 = clock.monotonic()
    n_heartbeats = seed_runs.insert_heartbeats(plans, runs, now=now, db=db)
    seconds["heartbeats"] = (n_heartbeats, clock.monotonic() - t0)

    t0 = clock.monotonic()
    n_tasks = seed_dcb.insert_periodic_tasks(rng, plans, sizes.periodic_tasks, now=now, db=db)
    seconds["django-celery-beat PeriodicTasks"] = (n_tasks, clock.monotonic() - t0)
    say(
        f"admin: {n_tasks:,} PeriodicTasks in {seconds['django-celery-beat PeriodicTasks'][1]:.1f} s"
    )

    t0 = clock.monotonic()
    seed_runs.reset_all_sequences()
    seed_bulk.analyze()
    seconds["ANALYZE"] = (0, clock.monotonic() - t0)
    hot = runs.hottest
    return Seeded(sizes, now, hot_job_id=hot, hot_run_id=runs.last_run_of(hot), seconds=seconds)
