"""The migration manual's busy job (F-12 `after_enqueue`, F-23): while a job
whose overlap policy runs one run at a time (skip, buffer_one, buffer_all)
is busy, the due time of its interval triggers anchored on the enqueue
stays due: the beat does not claim them (no run, no `skipped` record,
next_run_at unchanged). The first claim after the job's runs end makes ONE
run for it and sets next_run_at to that claim + N. The decisions are the
pure core's (jobs.core.missed.compute_stays_due, compute_held_until); this
module reads the facts for one batch of due triggers.
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Max

from jobs.core.missed import compute_held_until, compute_stays_due
from jobs.core.rules import Overlap
from jobs.core.triggers import IntervalAnchor
from jobs.models import Trigger
from jobs.policies import TriggerKind
from jobs.specs import trigger_spec
from runs.decisions import Decision
from runs.models import Run

# The jobs this beat last said were busy, so the decision log says it once
# per busy spell, not every poll.
_NOTED: set[int] = set()


def _enqueue_anchored(trigger: Trigger) -> bool:
    return (
        trigger.kind == TriggerKind.INTERVAL
        and trigger.interval_anchor == IntervalAnchor.AFTER_ENQUEUE
    )


def split_busy(
    triggers: list[Trigger],
    counts: dict[int, tuple[int, int]],
    *,
    now: datetime,
    decisions: list[Decision],
) -> tuple[list[Trigger], list[Trigger]]:
    """(to claim, held back) from a batch of due triggers; `counts` is
    runs.overlap.activity for their jobs. A held-back trigger is noted once
    per busy spell in `decisions` (kind `busy`). A trigger the core cannot
    evaluate is claimed: the claim parks it."""
    claim, held = [], []
    for trigger in triggers:
        running, waiting = counts.get(trigger.job_id, (0, 0))
        stays = False
        if _enqueue_anchored(trigger) and running + waiting:
            try:
                spec = trigger_spec(trigger)
                overlap = Overlap(trigger.job.overlap_policy)
            except Exception:  # noqa: BLE001 - the claim parks and logs it
                spec = None
            if spec is not None:
                stays = compute_stays_due(spec, overlap=overlap, active=running + waiting)
        (held if stays else claim).append(trigger)
        if not stays:
            _NOTED.discard(trigger.job_id)
        elif trigger.job_id not in _NOTED:
            _NOTED.add(trigger.job_id)
            detail = (
                f"the job is busy (overlap policy '{trigger.job.overlap_policy}'): its due time"
                f" {trigger.next_run_at.isoformat() if trigger.next_run_at else '?'} stays due"
                " and is caught up once after its runs end"
            )
            decisions.append(Decision("busy", trigger.job_id, None, trigger.pk, detail, now))
    return claim, held


def held_until(triggers: list[Trigger]) -> dict[int, datetime]:
    """trigger id -> the moment up to which its due time was held back by
    its busy job (jobs.core.missed.compute_held_until), for the enqueue-
    anchored triggers of the batch; one query, none without such triggers."""
    anchored = [t for t in triggers if _enqueue_anchored(t) and t.next_run_at is not None]
    if not anchored:
        return {}
    ends = dict(
        Run.objects.filter(
            job_id__in={t.job_id for t in anchored},
            started_at__isnull=False,
            finished_at__isnull=False,
        )
        .values("job_id")
        .annotate(end=Max("finished_at"))
        .values_list("job_id", "end")
    )
    found: dict[int, datetime] = {}
    for trigger in anchored:
        assert trigger.next_run_at is not None
        try:
            spec = trigger_spec(trigger)
        except Exception:  # noqa: BLE001 - the claim parks and logs it
            continue
        until = compute_held_until(
            spec, next_run_at=trigger.next_run_at, busy_until=ends.get(trigger.job_id)
        )
        if until is not None:
            found[trigger.pk] = until
    return found
