"""Runs that will never end by themselves (F-70, F-71): runs whose worker
died are marked `lost` (and retried where the job's policy says so), and
runs queued or running for too long are failed without being run. Both
are sections of runs.maintenance; every change is a compare-and-set in
runs.services.finish_run, so a worker ending the run at the same moment,
or a second maintenance pass, wins or loses cleanly."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q

from .locks import get_redis, job_lock, token_run_id
from .models import Run, RunStatus
from .retries import plan_retry
from .services import finish_run
from .transitions import MAX_INSTANCES

log = logging.getLogger("takt.maintenance")

LOST_MESSAGE = "lost: the worker stopped renewing the job lock (it crashed or was killed)"
DEFAULT_EXPIRE_AFTER_DAYS = 7


def recover_lost_runs(counts: Counter[str], *, now: datetime, batch: int, dry_run: bool) -> None:
    """Mark `lost` the running runs whose worker died, with the retry the
    job's policy plans. `counts` (kept up to date as it goes): `lost`,
    `retried`, and `locked` for the runs left alone.

    The rule: a run is lost when it has been `running` for longer than the
    lock TTL and no lock slot of its job holds its own token (a run's token
    names it: `run-<id>:<random>`). A live worker renews its slot every
    third of the TTL, so by then a live run's key exists. A slot held under
    a token that names no run (an older Takt, or a hand-made lock) could be
    anybody's: while one exists, the job's running runs are left alone (a
    false "lost" would run the job twice) and recovered by a later pass, or
    failed by the expiry after TAKT_EXPIRE_AFTER_DAYS. A run replaced by a
    `cancel_other` run is not concerned: the newcomer cancels it in the
    database before it takes the lock over.

    1. Load the candidates (running since before now - TTL) in id order,
       `batch` at a time, with their jobs.
    2. One pipelined round trip to Redis: the tokens in each job's slot
       keys (slots 0 to MAX_INSTANCES - 1, so a max_instances lowered since
       the run started hides none). Redis unreachable: the error propagates
       and nothing more is marked.
    3. Each lost run: running → lost by compare-and-set in finish_run, with
       the retry run, in one transaction. A run that ended in the meantime
       loses the compare-and-set and stays as it ended."""
    ttl = timedelta(seconds=settings.TAKT_LOCK_TTL_SECONDS)
    candidates = Run.objects.filter(status=RunStatus.RUNNING, started_at__lt=now - ttl)
    last_pk = 0
    while True:
        runs = list(candidates.filter(pk__gt=last_pk).select_related("job").order_by("pk")[:batch])
        if not runs:
            return
        last_pk = runs[-1].pk
        holders = _lock_holders(sorted({run.job_id for run in runs}))
        for run in runs:
            live, unknown = holders.get(run.job_id, (set(), False))
            if run.pk in live or unknown:
                counts["locked"] += 1
            elif dry_run:
                counts["lost"] += 1
            else:
                _mark_lost(run, counts, now=now)


def _lock_holders(job_ids: list[int]) -> dict[int, tuple[set[int], bool]]:
    """job id -> (the runs whose tokens hold one of its slots, whether a
    slot is held under a token that names no run)."""
    pipe = get_redis().pipeline(transaction=False)
    for job_id in job_ids:
        pipe.mget([job_lock(job_id, slot=slot).key for slot in range(MAX_INSTANCES)])
    holders: dict[int, tuple[set[int], bool]] = {}
    for job_id, tokens in zip(job_ids, pipe.execute(), strict=True):
        held = [t for t in tokens if t is not None]
        runs = {r for r in (token_run_id(t) for t in held) if r is not None}
        holders[job_id] = (runs, len(runs) < len(held))
    return holders


def _mark_lost(run: Run, counts: Counter[str], *, now: datetime) -> None:
    run.waits_for_runs = True  # type: ignore[attr-defined]  # finish_run's safe path
    plan = plan_retry(run, status=RunStatus.LOST, now=now)
    if not finish_run(run, status=RunStatus.LOST, now=now, message=LOST_MESSAGE, retry=plan):
        return  # it ended by itself meanwhile
    counts["lost"] += 1
    if plan is not None and plan.retry_at is not None:
        counts["retried"] += 1
    log.warning(
        "run %s of job %s lost: %s",
        run.pk,
        run.job_id,
        run.message,
        extra={"job_id": run.job_id, "run_id": run.pk},
    )


def expire_after_days() -> int:
    return int(getattr(settings, "TAKT_EXPIRE_AFTER_DAYS", DEFAULT_EXPIRE_AFTER_DAYS))


def expire_stale_runs(expired: list[int], *, now: datetime, batch: int, dry_run: bool) -> None:
    """Fail the runs `queued` (and due) or `running` for longer than
    TAKT_EXPIRE_AFTER_DAYS, without running them; appends their ids to
    `expired` as it goes. A queued run counts from when it was enqueued and
    became due (a run deferred to a later time waits legitimately), a
    running one from its start. Each goes through finish_run (compare-and-
    set from its status, no retry), so triggers anchored on run ends move
    on and the heartbeat records the failure. A worker that receives an
    expired run's message finds it no longer queued and does nothing."""
    days = expire_after_days()
    cutoff = now - timedelta(days=days)
    stale = Run.objects.filter(
        Q(status=RunStatus.QUEUED, enqueued_at__lt=cutoff, scheduled_for__lt=cutoff)
        | Q(status=RunStatus.RUNNING, started_at__lt=cutoff)
    )
    last_pk = 0
    while True:
        runs = list(stale.filter(pk__gt=last_pk).select_related("job").order_by("pk")[:batch])
        if not runs:
            return
        last_pk = runs[-1].pk
        for run in runs:
            if dry_run or _expire(run, days=days, now=now):
                expired.append(run.pk)


def _expire(run: Run, *, days: int, now: datetime) -> bool:
    old = run.status
    run.waits_for_runs = True  # type: ignore[attr-defined]  # finish_run's safe path
    return finish_run(
        run,
        status=RunStatus.FAILED,
        from_status=old,
        now=now,
        message=f"expired: {old} for more than {days} days",
    )
