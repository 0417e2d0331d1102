"""Backfill (F-101): runs for every fire time of a job in a past range.

1. The fire times of the job's enabled triggers in [start, end] are listed
   (at most MAX_FIRE_TIMES, else the request is refused naming `end`): the
   times the beat fires on (jobs/core/backfill.py). A fixed-rate interval
   without start_at is listed on the grid through its next_run_at (else its
   last fire time), not from the range's start; an interval anchored on the
   enqueue, a run's start or its end lists none (its runs set its times,
   and every one the beat reached is recorded): it is named in
   `BackfillResult.unlisted`, and `backfill_fire_times`, which the command
   and the admin's operation call first, refuses a job whose clocked
   triggers are all such, naming the trigger and `interval_anchor`.
2. A fire time that already has a run is left alone and counted: a
   backfill never runs a time twice. It is looked up, and its run made,
   by the fire time's key (jobs.specs.fire_time_key: with jitter, the fire
   time plus the trigger's delay), the key the beat's runs carry; the
   unique key (job, scheduled_for) refuses a second run all the same.
3. The new runs (trigger `catchup`) are admitted in time order: the first by
   the job's overlap policy against its active runs (skipped when the
   policy says so, and then the backfill stops), the others wait behind it
   (held) and start one after another, oldest first. With `allow`, up to
   max_instances run at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils.translation import gettext

from jobs.core.backfill import NoBackfillTimes, iter_backfill_times
from jobs.core.rules import Overlap
from jobs.core.triggers import UNCLOCKED
from jobs.errors import InvalidInput
from jobs.i18n import error_text
from jobs.models import Job, Trigger
from jobs.specs import fire_time_key, trigger_description, trigger_spec
from runs.core.admission import Admission
from runs.models import Run, RunStatus, RunTrigger
from runs.overlap import activity, admit
from runs.publish import publish_after_commit

MAX_FIRE_TIMES = 1000


@dataclass
class BackfillResult:
    fire_times: list[datetime] = field(default_factory=list)
    created: list[int] = field(default_factory=list)
    already_ran: int = 0
    skipped_reason: str = ""
    # The enabled triggers whose fire times backfill does not list, each
    # "interval_anchor: trigger #7 (…) lists no fire times to backfill: why"
    # (jobs/core/backfill.py).
    unlisted: list[str] = field(default_factory=list)


@dataclass
class _Listing:
    keyed: list[tuple[datetime, datetime]]  # (fire time, key), sorted, one per key
    unlisted: list[str]
    refusal: InvalidInput | None  # every clocked trigger is unlisted


def backfill_fire_times(
    job: Job, *, start: datetime, end: datetime, now: datetime | None = None
) -> list[datetime]:
    """The job's fire times in [start, end], sorted, duplicates removed: the
    plan the command and the admin's operation show and then backfill.
    Raises InvalidInput as `backfill` does (`end` after `now` only when
    `now` is given), and also when no trigger of the job has fire times a
    backfill can list (an interval anchored on the enqueue, a run's start
    or its end: the error names the trigger and `interval_anchor`)."""
    if now is not None and end > now:
        raise InvalidInput("end", gettext("must not be in the future"))
    listing = _list(job, start=start, end=end)
    if listing.refusal is not None:
        raise listing.refusal
    return sorted({fire for fire, _key in listing.keyed})


def _list(job: Job, *, start: datetime, end: datetime) -> _Listing:
    """Each enabled trigger's fire times in [start, end] with their keys.
    Raises InvalidInput naming "start" or "end" for a bad range or one of
    more than MAX_FIRE_TIMES fire times."""
    if start.tzinfo is None or end.tzinfo is None:
        name = "start" if start.tzinfo is None else "end"
        raise InvalidInput(name, gettext("must include a time zone"))
    if end < start:
        raise InvalidInput("end", gettext("must not be before the start"))
    keyed: dict[datetime, datetime] = {}
    unlisted: list[tuple[Trigger, NoBackfillTimes]] = []
    clocked = 0
    for trigger in job.triggers.filter(enabled=True).order_by("pk"):
        spec = trigger_spec(trigger)
        clocked += not isinstance(spec, UNCLOCKED)
        through = trigger.next_run_at or trigger.last_fired_at  # the beat's grid
        try:
            for fire in iter_backfill_times(spec, start=start, end=end, through=through):
                keyed.setdefault(fire_time_key(trigger, fire), fire)
                if len(keyed) > MAX_FIRE_TIMES:
                    text = gettext(
                        "the range holds more than %(max)d fire times; backfill a shorter one"
                    )
                    raise InvalidInput("end", text % {"max": MAX_FIRE_TIMES})
        except NoBackfillTimes as exc:
            unlisted.append((trigger, exc))
    refusal = None
    if unlisted and len(unlisted) == clocked:
        first, why = unlisted[0]
        refusal = InvalidInput(why.field, _unlisted_text(first, why))
    return _Listing(
        sorted((fire, key) for key, fire in keyed.items()),
        [f"{why.field}: {_unlisted_text(t, why)}" for t, why in unlisted],
        refusal,
    )


def _unlisted_text(trigger: Trigger, exc: NoBackfillTimes) -> str:
    text = gettext("trigger #%(id)s (%(trigger)s) lists no fire times to backfill: %(why)s")
    why = error_text(exc)  # in the reader's language
    return text % {"id": trigger.pk, "trigger": trigger_description(trigger), "why": why}


def backfill(
    job: Job,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    dry_run: bool = False,
    fire_times: list[datetime] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> BackfillResult:
    """Create the backfill runs (see the module docstring). `end` may not be
    after `now`: the schedule itself runs what is still to come.
    `fire_times`: the job's fire times in the range, if the caller listed
    them already (backfill_fire_times). `on_progress(handled, total)` is
    called as fire times are handled (a run created, or one found): first
    for those that already had a run, then per run created. A trigger whose
    fire times are not listed (an interval anchored on the enqueue, a run's
    start or its end) adds none and is named in `result.unlisted`; unlike
    backfill_fire_times, this does not refuse a job that has only such
    triggers: it creates nothing for it."""
    if end > now:
        raise InvalidInput("end", gettext("must not be in the future"))
    listing = _list(job, start=start, end=end)
    keyed = listing.keyed
    if fire_times is None:
        fire_times = sorted({fire for fire, _key in keyed})
    else:  # the times listed before (an operation's plan): only those
        listed = set(fire_times)
        keyed = [(fire, key) for fire, key in keyed if fire in listed]
    result = BackfillResult(fire_times=fire_times, unlisted=listing.unlisted)
    report = on_progress or (lambda handled, total: None)
    keys = [key for _fire, key in keyed]
    done = set(
        Run.objects.filter(job=job, scheduled_for__in=keys).values_list("scheduled_for", flat=True)
    )
    todo = sorted(key for key in keys if key not in done)
    result.already_ran = len(keys) - len(todo)
    report(result.already_ran, len(fire_times))
    if dry_run or not todo:
        return result
    running, waiting = activity([job.pk], now=now).get(job.pk, (0, 0))
    first = admit(job, running=running, waiting=waiting)
    if first.admission is Admission.SKIP:
        result.skipped_reason = first.reason
        return result
    parallel = job.max_instances if job.overlap_policy == Overlap.ALLOW else 1
    free = max(parallel - running - waiting, 0) if first.admission is Admission.QUEUE else 0
    to_send: list[Run] = []
    with transaction.atomic():
        for fire in todo:
            run = Run(
                job=job,
                trigger=RunTrigger.CATCHUP,
                status=RunStatus.QUEUED,
                held=free <= 0,
                priority=job.priority,
                params=job.params,
                scheduled_for=fire,  # the fire time's key
                enqueued_at=now,
                message="backfill",
            )
            try:
                with transaction.atomic():
                    run.save(force_insert=True)
            except IntegrityError:  # the beat ran this fire time meanwhile
                result.already_ran += 1
            else:
                result.created.append(run.pk)
                if not run.held:
                    free -= 1
                    if run.scheduled_for <= now:  # else the outbox sweep sends it then
                        to_send.append(run)
            report(result.already_ran + len(result.created), len(fire_times))
        publish_after_commit(list(to_send))
    return result
