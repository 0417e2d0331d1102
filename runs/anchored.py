"""Interval triggers anchored on a run (F-12 `from_start`, `from_finish`):
which run gives a waiting trigger its next fire time.

Such a trigger has one fire time at a time. The beat's claim makes at most
one run of it that will start and leaves the trigger waiting (next_run_at
NULL) for that run, and only that run sets it: its start + N
(`from_start`), its end + N (`from_finish`), or, for a run that ends
without starting, its end + N for either anchor (docs/policies.md).

"That run" is the trigger's own (`source_trigger`, made by the beat as
`schedule` or `catchup`) with the latest fire time that is not `skipped`
(run_source_trigger_idx serves it). A retry, a manual, API or backfill run carries no source trigger,
and an older own run (made before an edit gave the trigger a fire time of
its own again) is not the one it waits for: none of them moves it. The
model test found that any run of the job did (issue 27): a retry starting
while the trigger's own run still waited made it fire again, two of its
runs on the way.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from jobs.core import triggers as core
from jobs.models import Trigger
from jobs.policies import TriggerKind
from jobs.specs import trigger_spec
from runs.models import Run, RunStatus, RunTrigger

# The kinds of run a claim makes for a fire time.
CLAIMED = (RunTrigger.SCHEDULE, RunTrigger.CATCHUP)


def release_on_start(run: Run, *, started_at: datetime) -> None:
    """The run started (admitted: runs/starting.admit_start, not merely
    claimed: a claimed run put back to wait for a slot or the queue has not
    started): a `from_start` trigger waiting for it fires next at
    started_at + N. Found by the model's deep run: the claim moved it, and a
    run put back to wait for its group's slot let the trigger fire again."""
    _release(run, {core.IntervalAnchor.FROM_START: started_at})


def release_on_end(run: Run, *, finished_at: datetime) -> None:
    """The run ended (in any status): a `from_finish` trigger waiting for it
    fires next at finished_at + N; a `from_start` one too when its start did
    not set it (it never started: cancelled or refused while queued,
    skipped at its start; or its worker died between its claim and its
    admission). A trigger its start set no longer waits for it: nothing."""
    _release(
        run,
        {core.IntervalAnchor.FROM_FINISH: finished_at, core.IntervalAnchor.FROM_START: finished_at},
    )


def _release(run: Run, at_by_anchor: dict[core.IntervalAnchor, datetime]) -> None:
    if run.trigger not in CLAIMED:
        return
    trigger_id = run.source_trigger_id
    if trigger_id is None:  # a claim may have adopted it since it was read (waited_for)
        trigger_id = Run.objects.filter(pk=run.pk).values_list("source_trigger", flat=True).first()
        if trigger_id is None:
            return
    waiting = Trigger.objects.filter(
        pk=trigger_id,
        kind=TriggerKind.INTERVAL,
        interval_anchor__in=[a.value for a in at_by_anchor],
        next_run_at__isnull=True,
    ).first()
    if waiting is None or newer_runs(trigger_id, than=run).exists():
        return
    at = at_by_anchor[core.IntervalAnchor(waiting.interval_anchor)]
    nxt = core.compute_next_fire(trigger_spec(waiting), after=at, now=at)
    Trigger.objects.filter(pk=trigger_id, next_run_at__isnull=True).update(next_run_at=nxt)


def newer_runs(trigger_id: int, *, than: Run) -> QuerySet[Run]:
    """The trigger's own runs for a later fire time than run `than`'s, not
    `skipped`: if one exists, the trigger waits for it, not for `than`."""
    later = Run.objects.filter(source_trigger_id=trigger_id, scheduled_for__gt=than.scheduled_for)
    return _own(later)


def waited_for(trigger: Trigger, *, fire_key: datetime) -> Run | None:
    """The run a run-anchored trigger waits for after a claim of fire time
    `fire_key` met that fire time's run made elsewhere (a backfill's, a row
    restored by hand: the unique key (job, scheduled_for) refused the
    claim's): that run stands for the fire time, so the trigger adopts it
    as its own if it has no source trigger. Then its own run with the
    latest fire time that is not `skipped` (None: none)."""
    Run.objects.filter(
        job_id=trigger.job_id,
        scheduled_for=fire_key,
        trigger__in=CLAIMED,
        source_trigger__isnull=True,
    ).update(source_trigger=trigger)
    own = _own(Run.objects.filter(source_trigger=trigger))
    return own.order_by("-scheduled_for").first()


def newest_own_status() -> Coalesce:
    """For a query of triggers: the status of each one's own run with the
    latest fire time that is not `skipped` ('': none). A run-anchored trigger whose
    such run is queued or running waits for it."""
    own = _own(Run.objects.filter(source_trigger_id=OuterRef("pk")))
    newest = own.order_by("-scheduled_for")
    # '' for none, not NULL: NOT (… AND NULL IN (…)) would drop the row.
    return Coalesce(Subquery(newest.values("status")[:1]), Value(""))


def _own(runs: QuerySet[Run]) -> QuerySet[Run]:
    return runs.filter(trigger__in=CLAIMED).exclude(status=RunStatus.SKIPPED)
