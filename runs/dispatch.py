"""The beat's claim of due triggers (F-20, F-21, F-81, F-83, F-100).

`claim_due_runs` is the only place that turns fire times into runs:

1. In one transaction, read up to `limit` active triggers whose
   next_run_at <= now, oldest first, through the partial index
   `trigger_due_idx` (cost grows with the due triggers only). On
   PostgreSQL the rows are locked with SKIP LOCKED, so a second beat takes
   other rows instead of waiting.
2. For each, the pure core decides the fire time to run and the new
   next_run_at (`compute_claim`).
3. next_run_at is advanced by compare-and-set (UPDATE ... WHERE
   next_run_at = <value read>): if another beat or an edit moved it first,
   the row count is 0 and this beat leaves the trigger alone.
4. The run is inserted in the same transaction; the unique key
   (job, scheduled_for) is the last line of defence, so a race that got past
   step 3 still cannot create a second run for one fire time.
   An interval anchored on a run's start or finish waits (next_run_at
   NULL) for its run to set the next time; when the claim makes no run
   that will start (condition not met, refused in maintenance, skipped by
   the overlap policy, or its run exists already and has ended) it fires
   next an interval after now instead.
   An interval anchored on the enqueue (after_enqueue) of a busy job whose
   overlap policy runs one run at a time is not claimed: its due time
   stays due (runs/busy.py); the claim after the job's runs end catches
   it up once and sets next_run_at to that claim + N.
The common case goes in bulk: one batched UPDATE statement advances every
trigger of the batch (each row still guarded by its old next_run_at) and
one INSERT writes the runs. Should either find a row that moved or a fire time that
already has a run, the batch's transaction is rolled back and redone row by
row, each insert in its own savepoint.

5. After commit the caller publishes the returned run ids. A crash before
   publishing leaves queued, unpublished runs that `publish.sweep_unpublished`
   sends later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, connection, transaction

from jobs.core.missed import (
    Claim,
    MissedRunPolicy,
    PlannedRun,
    compute_claim,
    compute_next_without_run,
)
from jobs.core.rules import Overlap
from jobs.core.triggers import IntervalAnchor
from jobs.models import QueueState, ResultVariable, Trigger
from jobs.policies import TriggerKind
from jobs.specs import (
    RUN_ANCHORS,
    allowed_in_maintenance,
    fire_time_key,
    missed_run_rules,
    trigger_spec,
)
from runs.anchored import waited_for
from runs.busy import held_until, split_busy
from runs.core.admission import Admission
from runs.core.messages import MAINTENANCE_REFUSAL
from runs.core.start import condition_met, condition_text
from runs.decisions import Decision, record
from runs.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger
from runs.overlap import activity, admit, cancel_active_runs, revoke_after_commit
from runs.statements import advance_triggers, insert_runs
from runs.variables import job_condition

log = logging.getLogger("takt.dispatch")


@dataclass
class ClaimResult:
    queued: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    lost_races: int = 0
    to_publish: list[Run] = field(default_factory=list)  # the queued runs, job loaded
    decisions: list[Decision] = field(default_factory=list)  # for the decision log (F-65)
    capped: list[tuple[int, str, int]] = field(default_factory=list)  # (job id, name, skipped)
    held: list[int] = field(default_factory=list)  # triggers left due: their job is busy

    @property
    def claimed(self) -> int:
        return len(self.queued) + len(self.skipped)


class _RowByRow(Exception):
    """The bulk path met a race or a bad trigger: redo the batch row by row."""


def claim_due_runs(
    *,
    now: datetime,
    limit: int,
    maintenance: bool = False,
    only_targets: list[str] | None = None,
    defer_jobs: frozenset[int] = frozenset(),
    held: frozenset[int] = frozenset(),
) -> ClaimResult:
    """Claim up to `limit` due triggers and create their runs (see the
    module docstring). Returns the ids to publish after commit. In
    maintenance mode (F-29) the runs of jobs not allowed then are recorded
    `skipped`: the start is refused, and the trigger moves on. With
    `only_targets` (the allow-list, while the queue is paused) only the
    triggers of jobs running those targets are claimed; the triggers of
    `defer_jobs` are not claimed (they stay due), nor the triggers `held`
    (ids an earlier batch of the tick left due: ClaimResult.held)."""
    if connection.features.can_return_rows_from_bulk_insert:
        try:
            return _claim_in_bulk(
                now=now,
                limit=limit,
                maintenance=maintenance,
                only_targets=only_targets,
                defer_jobs=defer_jobs,
                held=held,
            )
        except _RowByRow:
            pass
    result = ClaimResult()
    with transaction.atomic():
        triggers = _lock_due(
            now=now, limit=limit, only_targets=only_targets, defer_jobs=defer_jobs, held=held
        )
        counts = activity([t.job_id for t in triggers], now=now) if triggers else {}
        triggers = _leave_busy(triggers, counts, now=now, result=result)
        load = _Load(counts, maintenance=maintenance, triggers=triggers)
        resumed_at = last_resume() if triggers else None
        held_to = held_until(triggers)
        for trigger in triggers:
            coalesce = _later(resumed_at, held_to.get(trigger.pk))
            _claim_one(trigger, now=now, load=load, result=result, resumed_at=coalesce)
    return result


def _leave_busy(
    triggers: list[Trigger],
    counts: dict[int, tuple[int, int]],
    *,
    now: datetime,
    result: ClaimResult,
) -> list[Trigger]:
    """The triggers to claim; the enqueue-anchored ones of busy jobs stay
    due (runs/busy.py) and are listed in result.held."""
    claim, busy = split_busy(triggers, counts, now=now, decisions=result.decisions)
    result.held += [t.pk for t in busy]
    return claim


def _later(first: datetime | None, second: datetime | None) -> datetime | None:
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


class _Load:
    """The jobs' active runs during one claim: (running, waiting) per job,
    counting the runs this claim adds, so two triggers of one job in a
    batch are admitted one after the other (F-23); and the values of the
    variables their conditions read (F-32), one query per batch."""

    def __init__(
        self,
        counts: dict[int, tuple[int, int]],
        *,
        maintenance: bool = False,
        triggers: list[Trigger] | None = None,
    ) -> None:
        self.counts = counts
        self.maintenance = maintenance
        self.claimed: set[int] = set()  # variables a run of this batch will consume
        ids = {t.job.condition_variable_id for t in triggers or ()} - {None}
        self.variables = (
            {
                pk: (name, value)
                for pk, name, value in ResultVariable.objects.filter(pk__in=ids).values_list(
                    "pk", "name", "value"
                )
            }
            if ids
            else {}
        )

    def unmet(self, trigger: Trigger) -> str | None:
        """Why the job's condition holds its fire time back, if it does:
        the time passes with no run (a condition is part of "is it due",
        as weekdays are); the start checks again."""
        job = trigger.job
        if job.condition_variable_id is None:
            return None
        name, value = self.variables.get(job.condition_variable_id, ("?", None))
        condition = job_condition(job, name)
        assert condition is not None
        if not condition_met(condition, value):
            return condition_text(condition, value)
        if condition.consume and (
            job.condition_variable_id in self.claimed or self.counts.get(job.pk, (0, 0))[1]
        ):
            # a run of the job waits to start and will consume this value:
            # a second run for it would only be skipped when it starts
            return CLAIMED % {"variable": name, "value": value}
        return None

    def claims(self, trigger: Trigger) -> bool:
        """After a run was made for the trigger: True when its job's
        condition consumes the value (no other run of this batch may count
        on it)."""
        if trigger.job.condition_variable_id is None or not trigger.job.condition_consume:
            return False
        self.claimed.add(trigger.job.condition_variable_id)
        return True

    def admit(self, trigger: Trigger) -> tuple[Admission, str]:
        if self.maintenance and not allowed_in_maintenance(trigger.job):
            return Admission.SKIP, MAINTENANCE_REFUSAL
        running, waiting = self.counts.get(trigger.job_id, (0, 0))
        decision = admit(trigger.job, running=running, waiting=waiting)
        if decision.admission is not Admission.SKIP:
            self.counts[trigger.job_id] = (running, waiting + 1)
        return decision.admission, decision.reason


def _lock_due(
    *,
    now: datetime,
    limit: int,
    only_targets: list[str] | None = None,
    defer_jobs: frozenset[int] = frozenset(),
    held: frozenset[int] = frozenset(),
) -> list[Trigger]:
    due = (
        Trigger.objects.filter(active=True, next_run_at__lte=now)
        .select_related("job")
        .order_by("next_run_at")
    )
    if only_targets is not None:
        due = due.filter(job__target__in=only_targets)
    if defer_jobs:
        due = due.exclude(job_id__in=defer_jobs)
    if held:
        due = due.exclude(pk__in=held)
    if connection.features.has_select_for_update_skip_locked:
        due = due.select_for_update(skip_locked=True, of=("self",))
    return list(due[:limit])


def last_resume() -> datetime | None:
    return QueueState.objects.filter(pk=1).values_list("resumed_at", flat=True).first()


def claim_for(trigger: Trigger, *, now: datetime, resumed_at: datetime | None) -> Claim:
    assert trigger.next_run_at is not None
    return compute_claim(
        trigger_spec(trigger),
        next_run_at=trigger.next_run_at,
        now=now,
        rules=missed_run_rules(trigger.job, coalesce_until=resumed_at),
    )


_BUFFERING = (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)


def _runs_for(trigger: Trigger, claim: Claim, *, now: datetime, load: _Load) -> list[Run]:
    """The runs for one claimed trigger (unsaved), oldest first: one per
    planned fire time, admitted by the overlap policy (the first against the
    job's active runs, the others of the same claim wait behind it), plus a
    visible `skipped` record when fire times were passed over (F-102)."""
    runs: list[Run] = []
    first: tuple[Admission, str] | None = None
    unmet = load.unmet(trigger) if claim.runs else None
    if unmet is not None:
        _note_unmet(trigger, unmet, now=now)
        return []
    _UNMET.pop(trigger.job_id, None)
    for planned in claim.runs:
        due_at = fire_time_key(trigger, planned.scheduled_for)
        if due_at > now:
            admitted = (Admission.QUEUE, "")  # admitted when it starts (like run_at)
        elif first is None:
            admitted = first = load.admit(trigger)
        elif first[0] is Admission.SKIP:
            admitted = first
        elif trigger.job.overlap_policy in _BUFFERING:
            # a buffering job keeps no more waiting runs than its policy
            # allows, catch-up runs of one claim included (no pile-up)
            admitted = load.admit(trigger)
        else:
            admitted = (Admission.HOLD, "")  # catch-up runs of one claim go one by one
        runs.append(_new_run(trigger, planned, due_at, now=now, admitted=admitted))
        if admitted[0] is not Admission.SKIP and load.claims(trigger):
            break  # one result starts one run: the later fire times pass with no run
    if claim.skipped_times and claim.skipped_last is not None:
        catchups = [r for r in runs if r.trigger == RunTrigger.CATCHUP]
        if catchups:  # the latest catch-up run stands for the fire times passed over
            catchups[-1].missed_count += claim.skipped_times
            if trigger.job.missed_run_policy == MissedRunPolicy.RUN_ALL:
                catchups[-1].capped = claim.skipped_times  # type: ignore[attr-defined]
        else:
            runs.insert(0, _skipped_record(trigger, claim, now=now))
    return runs


# Why a consumed condition holds a fire time back although its value is
# accepted: a run that waits to start will consume it (F-32).
CLAIMED = "condition held back: variable %(variable)r is %(value)s, and a run that waits to start will consume it"

# The last unmet condition this beat logged per job: the decision log says
# when a job's condition stops or starts holding it back, not every second.
_UNMET: dict[int, str] = {}


def _note_unmet(trigger: Trigger, unmet: str, *, now: datetime) -> None:
    if _UNMET.get(trigger.job_id) == unmet:
        return
    _UNMET[trigger.job_id] = unmet
    record([Decision("condition_not_met", trigger.job_id, None, trigger.pk, unmet, now)])


def _gets_no_run(claim: Claim, runs: list[Run]) -> bool:
    """Whether a claim that left next_run_at for a run to set (an interval
    anchored on a run's start or finish) made no run that will start: it
    made none (condition not met) or only `skipped` ones (maintenance,
    overlap). Then no run's start or end will set it."""
    if claim.next_run_at is not None or not claim.runs:
        return False
    return all(run.status == RunStatus.SKIPPED for run in runs)


def _reschedule(
    trigger: Trigger,
    *,
    now: datetime,
    result: ClaimResult,
    why: str = "no run starts for this fire time",
) -> None:
    """Defect 1 of issue 27: the fire time counts as a run that started and
    ended at `now` (jobs.core.missed.compute_next_without_run), so the
    trigger fires again instead of waiting for good. Guarded by NULL: a run
    that set it meanwhile wins."""
    nxt = compute_next_without_run(trigger_spec(trigger), now=now)
    if nxt is None:
        return
    Trigger.objects.filter(pk=trigger.pk, next_run_at__isnull=True).update(next_run_at=nxt)
    detail = (
        f"{why}: the interval ({trigger.interval_anchor})"
        f" counts from now and fires next at {nxt.isoformat()}"
    )
    result.decisions.append(Decision("rescheduled", trigger.job_id, None, trigger.pk, detail, now))


def _new_run(
    trigger: Trigger,
    planned: PlannedRun,
    due_at: datetime,
    *,
    now: datetime,
    admitted: tuple[Admission, str],
) -> Run:
    """The run for a planned fire time (unsaved), as the overlap policy
    admitted it: queued, held, or `skipped` with the reason. Its
    scheduled_for is the fire time's key (jobs.specs.fire_time_key: with
    jitter, the fire time plus the delay; one per fire time)."""
    job = trigger.job
    admission, reason = admitted
    skipped = admission is Admission.SKIP
    run = Run(
        job=job,
        source_trigger=trigger,
        trigger=RunTrigger.CATCHUP if planned.catchup else RunTrigger.SCHEDULE,
        status=RunStatus.SKIPPED if skipped else RunStatus.QUEUED,
        held=admission is Admission.HOLD,
        priority=job.priority,
        params=job.params,
        scheduled_for=due_at,
        enqueued_at=now,
        finished_at=now if skipped else None,
        message=f"skipped: {reason}" if skipped else "",
        missed_count=planned.missed,
    )
    run.replaces_others = admission is Admission.REPLACE  # type: ignore[attr-defined]
    return run


def _skipped_record(trigger: Trigger, claim: Claim, *, now: datetime) -> Run:
    """One `skipped` run that says which fire times were missed and passed
    over, so none is lost silently (F-102)."""
    job = trigger.job
    n = f"at least {claim.skipped_times}" if claim.truncated else str(claim.skipped_times)
    first, last = claim.skipped_first, claim.skipped_last
    assert first is not None and last is not None
    span = (
        f"at {last.isoformat()}"
        if first == last
        else f"from {first.isoformat()} to {last.isoformat()}"
    )
    return Run(
        job=job,
        source_trigger=trigger,
        trigger=RunTrigger.CATCHUP,
        status=RunStatus.SKIPPED,
        priority=job.priority,
        params=job.params,
        scheduled_for=fire_time_key(trigger, last),
        enqueued_at=now,
        finished_at=now,
        message=(
            f"skipped: {n} missed fire time(s) {span} (missed-run policy"
            f" '{job.missed_run_policy}', catch-up window, or the catch-up limit)"
        ),
        missed_count=claim.skipped_times,
    )


def _collect(run: Run, result: ClaimResult, *, now: datetime) -> None:
    source = run.source_trigger_id
    if run.status == RunStatus.SKIPPED:
        result.skipped.append(run.pk)
        kind = "refused" if MAINTENANCE_REFUSAL in run.message else "skipped"
        result.decisions.append(Decision(kind, run.job_id, run.pk, source, run.message, now))
        return
    kind = "held" if run.held else "due"
    detail = f"{run.trigger} run for {run.scheduled_for.isoformat()}"
    result.decisions.append(Decision(kind, run.job_id, run.pk, source, detail, now))
    capped = getattr(run, "capped", 0)
    if capped:
        detail = f"{capped} missed fire time(s) not caught up (catch-up limit or window)"
        result.decisions.append(Decision("catchup_capped", run.job_id, run.pk, source, detail, now))
        result.capped.append((run.job_id, run.job.name, capped))
    result.queued.append(run.pk)
    if getattr(run, "replaces_others", False):
        revoke_after_commit(
            cancel_active_runs(
                run.job_id, keep=run.pk, now=now, reason=f"cancelled: replaced by run #{run.pk}"
            )
        )
    if not run.held and run.scheduled_for <= now:
        result.to_publish.append(run)


def _claim_in_bulk(
    *,
    now: datetime,
    limit: int,
    maintenance: bool = False,
    only_targets: list[str] | None = None,
    defer_jobs: frozenset[int] = frozenset(),
    held: frozenset[int] = frozenset(),
) -> ClaimResult:
    result = ClaimResult()
    with transaction.atomic():
        triggers = _lock_due(
            now=now, limit=limit, only_targets=only_targets, defer_jobs=defer_jobs, held=held
        )
        if not triggers:
            return result
        counts = activity([t.job_id for t in triggers], now=now)
        triggers = _leave_busy(triggers, counts, now=now, result=result)
        if not triggers:
            return result
        resumed_at = last_resume()
        held_to = held_until(triggers)
        try:
            claims = [
                claim_for(t, now=now, resumed_at=_later(resumed_at, held_to.get(t.pk)))
                for t in triggers
            ]
        except Exception:
            raise _RowByRow from None  # the row-by-row path parks the bad trigger
        won = advance_triggers(
            [
                (
                    t.pk,
                    t.next_run_at,
                    c.next_run_at,
                    t.missed_count + c.missed,
                    c.scheduled_for or t.last_fired_at,
                )
                for t, c in zip(triggers, claims, strict=True)
            ]
        )
        if won != len(triggers):
            raise _RowByRow
        load = _Load(counts, maintenance=maintenance, triggers=triggers)
        runs, unrun = [], []
        for trigger, claim in zip(triggers, claims, strict=True):
            made = _runs_for(trigger, claim, now=now, load=load)
            runs += made
            if _gets_no_run(claim, made):
                unrun.append(trigger)
        try:
            with transaction.atomic():
                insert_runs(runs)
        except IntegrityError:
            raise _RowByRow from None
        for run in runs:
            _collect(run, result, now=now)
        for trigger in unrun:
            _reschedule(trigger, now=now, result=result)
    return result


def _claim_one(
    trigger: Trigger,
    *,
    now: datetime,
    load: _Load,
    result: ClaimResult,
    resumed_at: datetime | None = None,
) -> None:
    old_next = trigger.next_run_at
    assert old_next is not None
    extra = {"job_id": trigger.job_id, "trigger_id": trigger.pk}
    try:
        claim = claim_for(trigger, now=now, resumed_at=resumed_at)
    except Exception:
        # A trigger the core cannot evaluate must not stall every other job:
        # park it (no next run) and say so.
        log.exception("trigger %s cannot be evaluated; it is parked", trigger.pk, extra=extra)
        Trigger.objects.filter(pk=trigger.pk, next_run_at=old_next).update(next_run_at=None)
        return
    changes = {
        "next_run_at": claim.next_run_at,
        "missed_count": trigger.missed_count + claim.missed,
    }
    if claim.scheduled_for is not None:
        changes["last_fired_at"] = claim.scheduled_for
    won = Trigger.objects.filter(pk=trigger.pk, next_run_at=old_next).update(**changes)
    if won != 1:
        result.lost_races += 1
        return
    runs = _runs_for(trigger, claim, now=now, load=load)
    if _gets_no_run(claim, runs):
        _reschedule(trigger, now=now, result=result)
    duplicates: list[Run] = []
    for run in runs:
        try:
            with transaction.atomic():  # a savepoint: a duplicate key spoils only this insert
                run.save(force_insert=True)
        except IntegrityError:
            result.lost_races += 1
            duplicates.append(run)
            log.info(
                "fire time %s of job %s already has a run",
                run.scheduled_for,
                trigger.job_id,
                extra=extra,
            )
            continue
        _collect(run, result, now=now)
    if duplicates and _left_waiting(trigger, claim, runs, duplicates):
        taken = duplicates[-1].scheduled_for.isoformat()
        _reschedule(trigger, now=now, result=result, why=f"fire time {taken} already has a run")


def _left_waiting(trigger: Trigger, claim: Claim, runs: list[Run], duplicates: list[Run]) -> bool:
    """Whether a claim whose insert met the unique key (job, scheduled_for)
    left an interval anchored on a run's start or finish with no next fire
    time and no run to set one. The claim set next_run_at to NULL for the
    run it made; that run was a duplicate, so none of this claim's runs
    will start. The run the trigger waits for then (runs/anchored.py: the
    fire time's run, adopted, or its own with a later fire time) sets it
    only if it has not started yet (`from_start`: its start, or its end if
    it never starts) or has not ended (`from_finish`: its end). Without
    one, the fire time counts as a run that started and ended at the claim
    (claim + N), as for any claim that makes no run that will start."""
    anchor = trigger.interval_anchor
    if trigger.kind != TriggerKind.INTERVAL or anchor not in RUN_ANCHORS:
        return False  # its claim set next_run_at (None: a once trigger that fired)
    if claim.next_run_at is not None or _gets_no_run(claim, runs):
        return False  # the claim set it, or _reschedule did already
    taken = {id(run) for run in duplicates}
    if any(run.status != RunStatus.SKIPPED for run in runs if id(run) not in taken):
        return False  # a run this claim made will set it
    setter = waited_for(trigger, fire_key=duplicates[-1].scheduled_for)
    if setter is None:
        return True
    if anchor == IntervalAnchor.FROM_START:
        return setter.status != RunStatus.QUEUED
    return setter.status not in ACTIVE_STATUSES
