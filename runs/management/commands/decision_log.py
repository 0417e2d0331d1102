"""F-65: `manage.py decision_log [--job ID] [--limit N]` — the scheduler's
decisions, newest first (runs/decisions.py lists the kinds).

One line per decision: its time in UTC, its kind, the job (with its name),
the run and the trigger, and the detail. The detail is the one recorded,
with what the database says now added for an operator: the name of every
job it mentions as `job #N`, and the job of the run holding a slot that a
run waits for (the engine records the group with its limit, or
TAKT_MAX_CONCURRENCY, itself). The log lives in the database, moved
there from Redis by the beat and by this command before it reads
(runs/decisions.py); when the database cannot be read the lines are the
entries Redis still holds, without the additions.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DatabaseError

from jobs.core.watch import printable
from jobs.models import Job
from runs.connectivity import require_redis
from runs.decisions import query
from runs.models import Run

KIND_WIDTH = len("double_start_prevented")
JOB_REF = re.compile(r"\bjob #(\d+)")
HOLDER = re.compile(r"held by run #(\d+)")
SLOT_KINDS = ("waiting_for_slot", "limit_reached", "slot_granted")


class Command(BaseCommand):
    help = (
        "Print the scheduler's latest decisions, newest first: due, skipped, refused, held,"
        " start, end, cancelled, double start prevented, lock waits, condition not met,"
        " waiting for a slot, limit reached, slot granted, variable changed, dependency and"
        " child started, maintenance on/off (runs/decisions.py says what each means)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--job", type=int, default=None, help="only this job's")
        parser.add_argument("--limit", type=int, default=50)

    def handle(self, *args: Any, **options: Any) -> None:
        require_redis()
        entries = query(job_id=options["job"], limit=options["limit"])
        known = _Known.of(entries)
        for entry in entries:
            self.stdout.write(printable(known.line(entry)))  # no escape reaches the terminal


class _Known:
    """What the database says about the jobs and runs that the entries
    name: two queries for a whole page, none when it cannot be read."""

    def __init__(self, jobs: dict[int, Job], run_jobs: dict[int, int]) -> None:
        self.jobs, self.run_jobs = jobs, run_jobs

    @classmethod
    def of(cls, entries: list[dict[str, Any]]) -> _Known:
        job_ids = {int(e["job"]) for e in entries if str(e.get("job", "")).isdigit()}
        run_ids: set[int] = set()
        for entry in entries:
            detail = entry.get("detail", "")
            job_ids |= {int(n) for n in JOB_REF.findall(detail)}
            run_ids |= {int(n) for n in HOLDER.findall(detail)}
        try:
            run_jobs = dict(Run.objects.filter(pk__in=run_ids).values_list("pk", "job_id"))
            job_ids |= set(run_jobs.values())
            jobs = Job.objects.filter(pk__in=job_ids)
            return cls({job.pk: job for job in jobs}, run_jobs)
        except DatabaseError:
            return cls({}, {})

    def job_words(self, job_id: int) -> str:
        job = self.jobs.get(job_id)
        return f"{job.name!r} (#{job_id})" if job is not None else f"#{job_id}"

    def line(self, entry: dict[str, Any]) -> str:
        job_id = int(entry["job"]) if str(entry.get("job", "")).isdigit() else 0
        job = self.jobs.get(job_id)
        who = "all jobs" if job_id == 0 else f"job {job_id}" + (f" {job.name!r}" if job else "")
        run = f" run {entry['run']}" if entry.get("run") else ""
        trigger = f" trigger {entry['trigger']}" if entry.get("trigger") else ""
        kind = entry.get("kind", "?")
        return (
            f"{_utc(entry.get('at', ''))}  {kind:<{KIND_WIDTH}}  {who}{run}{trigger}"
            f"  {self.detail(kind, job, entry.get('detail', ''))}"
        )

    def detail(self, kind: str, job: Job | None, detail: str) -> str:
        detail = JOB_REF.sub(lambda m: f"job {self.job_words(int(m[1]))}", detail)
        if kind not in SLOT_KINDS:
            return detail
        return HOLDER.sub(lambda m: f"held by {self._run_words(int(m[1]))}", detail)

    def _run_words(self, run_id: int) -> str:
        job_id = self.run_jobs.get(run_id)
        return f"run #{run_id}" + (f" of job {self.job_words(job_id)}" if job_id else "")


def _utc(at: str) -> str:
    try:
        return datetime.fromisoformat(at).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except ValueError:
        return at
