"""The decision log's `not_due` entries (F-65): a due check that found a
job held back, with why, written once per spell (as runs/busy.py writes
`busy`), not at every poll.

A job is held back when a trigger of it has a fire time that has come
(next_run_at <= now) and

* the job is paused (F-104): its triggers are inactive, so the claim never
  reads them; the fire time waits for the job's resume;
* or the queue is paused (F-28): nothing is claimed but the jobs on the
  maintenance allow-list; the fire time stays due until the queue resumes.

A spell is the stretch of checks that find a job held for one reason
(its own pause, the queue's pause); when a check no longer finds it so,
the spell is over, and the next one is written again. The beat runs the
check every NOT_DUE_EVERY_S (two indexed queries, LIMIT MAX_JOBS each);
each beat process remembers its spells, so a restarted beat writes a
spell that goes on once more.
"""

from __future__ import annotations

from datetime import datetime

from jobs import registry
from jobs.models import QueueState, Trigger
from runs.decisions import Decision, record

# At most this many held jobs a check writes about per reason (a paused
# queue with 10,000 due jobs writes the first ones; the rest wait for the
# next spell).
MAX_JOBS = 1000

# job id -> its spell: ("job", paused_at) or ("queue", paused_at).
_NOTED: dict[int, tuple[str, str]] = {}


def _at(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "?"


def held_jobs(*, now: datetime, skip_jobs: frozenset[int] = frozenset()) -> list[Decision]:
    """The `not_due` decisions for the jobs held back at `now` whose spell
    began since the last check; `skip_jobs` are left out (a tick's held
    built-in jobs). Forgets the spells that are over."""
    found: dict[int, tuple[tuple[str, str], Decision]] = {}
    paused = (
        Trigger.objects.filter(job__paused=True, job__enabled=True, next_run_at__lte=now)
        .exclude(job_id__in=skip_jobs)
        .order_by("next_run_at")
        .values_list(
            "pk", "job_id", "next_run_at", "job__paused_by", "job__paused_at", "job__pause_note"
        )[:MAX_JOBS]
    )
    for trigger_id, job_id, due, by, since, note in paused:
        if job_id in found:
            continue
        detail = (
            f"the job is paused (by {by or '?'} at {_at(since)}{': ' + note if note else ''}):"
            f" its due time {_at(due)} waits until it is resumed"
        )
        spell = ("job", _at(since))
        found[job_id] = (spell, Decision("not_due", job_id, None, trigger_id, detail, now))
    queue = QueueState.objects.filter(pk=1, paused=True).first()
    if queue is not None:
        due_now = (
            Trigger.objects.filter(active=True, next_run_at__lte=now)
            .exclude(job_id__in=skip_jobs)
            .exclude(job__target__in=registry.allowed_names())
            .order_by("next_run_at")
            .values_list("pk", "job_id", "next_run_at")[:MAX_JOBS]
        )
        note = f": {queue.pause_note}" if queue.pause_note else ""
        for trigger_id, job_id, due in due_now:
            if job_id in found:
                continue
            detail = (
                f"the queue is paused (by {queue.paused_by or '?'} at {_at(queue.paused_at)}"
                f"{note}): its due time {_at(due)} stays due until the queue is resumed"
            )
            spell = ("queue", _at(queue.paused_at))
            found[job_id] = (spell, Decision("not_due", job_id, None, trigger_id, detail, now))
    new = [d for job_id, (spell, d) in found.items() if _NOTED.get(job_id) != spell]
    _NOTED.clear()
    _NOTED.update({job_id: spell for job_id, (spell, _d) in found.items()})
    return new


def note_held_jobs(*, now: datetime, skip_jobs: frozenset[int] = frozenset()) -> None:
    """Record held_jobs() in the decision log."""
    record(held_jobs(now=now, skip_jobs=skip_jobs))
