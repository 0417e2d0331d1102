"""A schedule that stopped is never silent (F-111, issue 27 item 3).

A trigger of an enabled job fires only while it has a next_run_at, or while
a run of its job is under way that will set one (an interval anchored on a
run's start or finish). One that has neither will never fire again, and
nothing else says so: a future defect, a row edited by hand, a trigger the
beat parked because it could not evaluate it. `repair_stalled_triggers`
finds every such trigger, raises a critical alert naming the job and the
trigger ("Trigger #7 of 'Export' will not fire again", through the
`trigger_stalled` signal: heartbeats turns it into the alert), records a
`stalled` decision (F-65) and repairs it: its next fire time from now (a
once trigger that never fired: its own time, which the missed-run policy
then treats as any missed fire time).

Not stalled, and so never named: a trigger with a next_run_at; a once
trigger that fired (last_fired_at set) or whose fire time the missed-run
policy passed over (its skipped record); a dependency or file trigger
(they fire on events, never by next_run_at); a trigger of a disabled,
paused or child job, or a disabled trigger (`active` is off); an interval
anchored on a run while its job has a queued or running run (that run
sets it); a job past its run limit; a trigger whose schedule has no fire
time after now (it has finished).

Cost: one query, through the partial index `trigger_due_idx` (active
triggers by next_run_at: the NULLs are a range of it) and, per trigger
found there, the (job, status) index of runs. Every beat runs it every
STALLED_CHECK_EVERY_S (runs/tick.py), and the hourly maintenance as its
section ``schedules``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet

from jobs.core import triggers as core
from jobs.models import Trigger
from jobs.policies import TriggerKind
from jobs.specs import RUN_ANCHORS, trigger_description, trigger_spec
from runs.anchored import newest_own_status
from runs.decisions import Decision, record
from runs.models import ACTIVE_STATUSES, Run
from runs.signals import trigger_stalled

log = logging.getLogger("takt.beat")

# The kinds whose fire times come from next_run_at.
TIMED_KINDS = (TriggerKind.CRON, TriggerKind.INTERVAL, TriggerKind.CALENDAR, TriggerKind.ONCE)


@dataclass(frozen=True)
class Stalled:
    """A trigger found with no next fire time and no run to set one:
    `next_run_at` what it was given (None: it could not be repaired, and
    `error` says why)."""

    trigger_id: int
    job_id: int
    job_name: str
    trigger_text: str
    next_run_at: datetime | None
    error: str = ""

    @property
    def title(self) -> str:
        return f"Trigger #{self.trigger_id} of '{self.job_name}' will not fire again"

    @property
    def detail(self) -> str:
        said = (
            f"trigger #{self.trigger_id} ({self.trigger_text}) of job #{self.job_id} had no"
            " next fire time and no queued or running run that would set one"
        )
        if self.next_run_at is None:
            return f"{said}; it could not be repaired: {self.error}"
        return f"{said}; repaired: it fires next at {self.next_run_at.isoformat()}"


def stalled_triggers() -> QuerySet[Trigger]:
    """The stalled triggers with their jobs, in id order (one query)."""
    # An interval anchored on a run whose own run is still to start or end:
    # that run will set it (runs/anchored.py; another run of the job will not).
    waits_for_its_run = Q(
        kind=TriggerKind.INTERVAL, interval_anchor__in=RUN_ANCHORS, waited__in=ACTIVE_STATUSES
    )
    # A once trigger whose one fire time the claim handled: it ran
    # (last_fired_at), or the missed-run policy passed over it (its skipped
    # record names it; found by the model test: "repaired", it was skipped
    # again at every check).
    handled = Exists(Run.objects.filter(source_trigger_id=OuterRef("pk")))
    return (
        Trigger.objects.filter(active=True, next_run_at__isnull=True, kind__in=TIMED_KINDS)
        .annotate(waited=newest_own_status())
        .exclude(kind=TriggerKind.ONCE, last_fired_at__isnull=False)
        .exclude(Q(kind=TriggerKind.ONCE) & handled)
        .exclude(job__max_runs__isnull=False, job__runs_done__gte=F("job__max_runs"))
        .exclude(waits_for_its_run)
        .select_related("job")
        .order_by("pk")
    )


def repair_stalled_triggers(*, now: datetime, dry_run: bool = False) -> list[Stalled]:
    """Find the stalled triggers, and (unless `dry_run`) repair each by
    compare-and-set on its NULL next_run_at (a run or an edit that set it
    meanwhile wins, and nothing is said), record a `stalled` decision and
    send `trigger_stalled` (the critical alert). Returns what was found
    (in a dry run: what would be repaired)."""
    found: list[Stalled] = []
    for trigger in stalled_triggers():
        stalled = _repair_plan(trigger, now=now)
        if stalled is None:
            continue
        if not dry_run and not _repair(trigger, stalled):
            continue
        found.append(stalled)
    if found and not dry_run:
        record(Decision("stalled", s.job_id, None, s.trigger_id, s.detail, now) for s in found)
        for s in found:
            log.error(s.detail, extra={"job_id": s.job_id, "trigger_id": s.trigger_id})
            trigger_stalled.send(sender=Trigger, stalled=s, now=now)
    return found


def _repair_plan(trigger: Trigger, *, now: datetime) -> Stalled | None:
    """What the trigger gets: its next fire time from now; None when its
    schedule has none (it has finished: nothing stalled)."""
    job = trigger.job
    try:
        spec = trigger_spec(trigger, now=now)
        if isinstance(spec, core.OnceSpec):
            nxt: datetime | None = spec.at.astimezone(UTC)  # never fired: its own time
        else:
            nxt = core.compute_first_fire(spec, now=now)
    except Exception as exc:  # a trigger the core cannot evaluate (the beat parks those)
        error = f"it cannot be evaluated: {exc}"
        return Stalled(trigger.pk, job.pk, job.name, trigger_description(trigger), None, error)
    if nxt is None:
        return None
    return Stalled(trigger.pk, job.pk, job.name, trigger_description(trigger), nxt)


def _repair(trigger: Trigger, stalled: Stalled) -> bool:
    """True when the trigger still had no next fire time (and now has one,
    if one could be computed)."""
    rows = Trigger.objects.filter(pk=trigger.pk, next_run_at__isnull=True)
    if stalled.next_run_at is None:
        return rows.exists()
    return bool(rows.update(next_run_at=stalled.next_run_at))
