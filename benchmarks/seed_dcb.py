"""django-celery-beat's side of the admin benchmark: a PeriodicTask per Takt
job (the anchor's changelist at the same size), each on the schedule of
its job's first trigger. Crontab and interval schedules are shared, as the
admin's form picks an existing one; each one-off task has its clocked time.
django-celery-beat's crontab has no seconds and no `L`: a six-field
expression keeps its minute fields, a month-end preset becomes days 28-31.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from benchmarks import seed_bulk
from jobs.core.presets import CalendarRule

PT_COLUMNS = ("id", "name", "task", "interval_id", "crontab_id", "clocked_id", "one_off",
              "enabled", "start_time", "last_run_at", "total_run_count", "date_changed",
              "description")  # fmt: skip
CRONTAB_COLUMNS = (
    "id",
    "minute",
    "hour",
    "day_of_month",
    "month_of_year",
    "day_of_week",
    "timezone",
)
DAILY = ("0", "0", "*", "*", "*")
# Calendar presets as crontab (day of month, month); see seed_admin.CALENDARS.
CALENDAR_DAYS = {
    CalendarRule.DAILY: ("*", "*"),
    CalendarRule.MONTH_END: ("28-31", "*"),
    CalendarRule.DAY_OF_MONTH: ("*", "*"),
    CalendarRule.QUARTER_START: ("1", "1,4,7,10"),
}


def _crontab_fields(schedule: tuple[Any, ...]) -> tuple[str, ...]:
    """minute, hour, day of month, month, day of week for a crontab."""
    if schedule[0] == "cron":
        return tuple(schedule[1].split()[-5:])  # six fields: drop the seconds
    if schedule[0] == "calendar":
        rule, at, day = schedule[1:]
        dom, month = CALENDAR_DAYS[rule]
        return (str(at.minute), str(at.hour), str(day) if day else dom, month, "*")
    return DAILY


def insert_periodic_tasks(rng: random.Random, plans: list[Any], count: int, *, now: datetime,
                          db: seed_bulk.Backend) -> int:  # fmt: skip
    """`count` PeriodicTasks mirroring `plans` in order (repeating them with
    a suffix if there are fewer jobs). Returns the number inserted."""
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        PeriodicTasks,
    )

    # Schedules left by another section (the tick's hourly interval) would clash with the ids.
    seed_bulk.empty([PeriodicTask, ClockedSchedule, CrontabSchedule, IntervalSchedule])
    crontabs: dict[tuple[str, ...], int] = {}
    intervals: dict[int, int] = {}
    clocked: list[tuple[Any, ...]] = []
    rows = []
    for i in range(count):
        plan = plans[i % len(plans)]
        kind = plan.schedule[0]
        interval_id = crontab_id = clocked_id = None
        if kind == "interval":
            interval_id = intervals.setdefault(plan.schedule[1], len(intervals) + 1)
        elif kind == "once":
            clocked.append((len(clocked) + 1, db.time(plan.schedule[1])))
            clocked_id = len(clocked)
        else:
            zone = plan.schedule[2] if kind == "cron" else "UTC"
            key = (*_crontab_fields(plan.schedule), zone)
            crontab_id = crontabs.setdefault(key, len(crontabs) + 1)
        enabled = plan.enabled
        last_run = None
        if plan.runs and enabled:
            last_run = now - timedelta(seconds=rng.uniform(0, 14 * 86400 / plan.runs))
        start = now - timedelta(days=rng.uniform(1, 300)) if rng.random() < 0.05 else None
        suffix = f" ({i // len(plans)})" if i >= len(plans) else ""
        rows.append((
            i + 1, plan.name + suffix, plan.target, interval_id, crontab_id, clocked_id,
            kind == "once", enabled, db.time(start), db.time(last_run), plan.runs,
            db.time(now - timedelta(days=rng.uniform(0, 300))), f"runs {plan.target}",
        ))  # fmt: skip
    seed_bulk.insert(CrontabSchedule, CRONTAB_COLUMNS,
                     [(pk, *key) for key, pk in crontabs.items()])  # fmt: skip
    seed_bulk.insert(IntervalSchedule, ("id", "every", "period"),
                     [(pk, every, "seconds") for every, pk in intervals.items()])  # fmt: skip
    seed_bulk.insert(ClockedSchedule, ("id", "clocked_time"), clocked)
    n = seed_bulk.insert(PeriodicTask, PT_COLUMNS, rows)
    PeriodicTasks.update_changed()
    return n
