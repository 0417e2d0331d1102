"""Runs that will never end by themselves (F-70, F-71): runs whose worker
died are marked `lost` (and retried where the job's policy says so), and
runs queued or running for too long are failed without being run. Both
are sections of runs.maintenance; the lost-run check also runs from every
beat's tick, every TAKT_LOST_CHECK_SECONDS (`check_lost_runs`). Every
change is a compare-and-set in runs.ending.finish_run, so a worker
ending the run at the same moment, another beat's check or a second
maintenance pass wins or loses cleanly."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet

from jobs.core.rules import MAX_INSTANCES
from runs.children import active_children
from runs.ending import finish_run
from runs.locks import get_redis, job_lock, token_run_id
from runs.models import Run, RunStatus
from runs.overlap import release_next_held
from runs.redis_age import data_age_seconds
from runs.retries import plan_retry

log = logging.getLogger("takt.maintenance")

LOST_MESSAGE = "lost: the worker stopped renewing the job lock (it crashed or was killed)"
DEFAULT_EXPIRE_AFTER_DAYS = 7


def recover_lost_runs(
    counts: Counter[str],
    *,
    now: datetime,
    batch: int,
    dry_run: bool,
    unjudged: set[int] | None = None,
) -> None:
    """Mark `lost` the running runs whose worker died, with the retry the
    job's policy plans. `counts` (kept up to date as it goes): `lost`,
    `retried`, `locked` for the runs left alone, and `waited` (1) when
    nothing was marked because Redis's data is too young.

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

    1. Load the candidates (running since before now - TTL) in start
       order, `batch` at a time, with their jobs: one probe of
       run_running_idx when none is running.
    2. Redis's data younger than TTL + 1 s (a restart without persistence
       or a flush, runs/redis_age.py): live keepers may not have put their
       locks back yet, so nothing is marked; logged, `waited` counted,
       and the jobs of the candidates added to `unjudged` (the beat holds
       their due fire times back meanwhile: runs/tick.py).
    3. One pipelined round trip to Redis: the tokens in each job's slot
       keys 0 to max_instances - 1. For the jobs with a run not found
       there, a second one for slots 0 to MAX_INSTANCES - 1 (a
       max_instances lowered since the run started hides none). Redis
       unreachable: the error propagates and nothing more is marked.
    4. Each lost run: running → lost by compare-and-set in finish_run, with
       the retry run, in one transaction; its duration is unknown (None).
       A run that ended in the meantime, or that another beat marked
       first, loses the compare-and-set and stays as it is. Then the job's
       next held run is sent (the job is free)."""
    candidates = lost_candidates(now=now)
    after, first = Q(), True
    while True:
        runs = list(candidates.filter(after).select_related("job")[:batch])
        if not runs:
            return
        if first and _redis_too_young(runs):
            counts["waited"] = 1
            if unjudged is not None:
                unjudged.update(candidates.order_by().values_list("job_id", flat=True).distinct())
            return
        first, last = False, runs[-1]
        after = Q(started_at__gt=last.started_at) | Q(started_at=last.started_at, pk__gt=last.pk)
        holders = _lock_holders({run.job_id: run.job.max_instances for run in runs})
        suspects = {run.job_id for run in runs if not _held(run, holders)}
        if suspects:  # a max_instances lowered since the run started hides no slot
            holders.update(_lock_holders(dict.fromkeys(suspects, MAX_INSTANCES)))
        for run in runs:
            if _held(run, holders):
                counts["locked"] += 1
            elif active_children(run.pk):  # a parent run holds no lock while its children run
                counts["parent"] += 1
            elif dry_run:
                counts["lost"] += 1
            else:
                _mark_lost(run, counts, now=now)


def lost_candidates(*, now: datetime) -> QuerySet[Run]:
    """The runs running since before now - TAKT_LOCK_TTL_SECONDS, in start
    order: the order of run_running_idx, which both SQLite and PostgreSQL
    then use (ordered by id, SQLite would scan the table)."""
    ttl = timedelta(seconds=settings.TAKT_LOCK_TTL_SECONDS)
    return Run.objects.filter(status=RunStatus.RUNNING, started_at__lt=now - ttl).order_by(
        "started_at", "pk"
    )


def _redis_too_young(runs: list[Run]) -> bool:
    age_s = data_age_seconds()
    grace_s = settings.TAKT_LOCK_TTL_SECONDS + 1
    if age_s >= grace_s:
        return False
    log.info(
        "lost-run check waits: Redis's data is %.1f s old (less than the lock TTL + 1 s,"
        " %d s), live workers may not have re-taken their locks; %d runs not looked at",
        age_s,
        grace_s,
        len(runs),
    )
    return True


def check_lost_runs(
    *, now: datetime, batch: int = 500, unjudged: set[int] | None = None
) -> Counter[str]:
    """The beat's continuous lost-run check (every TAKT_LOST_CHECK_SECONDS,
    from runs.tick): recover_lost_runs, for real; `unjudged` gets the jobs
    whose running runs it could not judge yet. Any number of beats may run
    it at once. Raises redis.RedisError and database errors."""
    counts: Counter[str] = Counter()
    recover_lost_runs(counts, now=now, batch=batch, dry_run=False, unjudged=unjudged)
    return counts


def _held(run: Run, holders: dict[int, tuple[set[int], bool]]) -> bool:
    live, unknown = holders.get(run.job_id, (set(), False))
    return run.pk in live or unknown


def _lock_holders(slots: dict[int, int]) -> dict[int, tuple[set[int], bool]]:
    """job id -> (the runs whose tokens hold one of its first `slots[job
    id]` slots, whether one of them is held under a token that names no
    run); one pipelined round trip."""
    pipe = get_redis().pipeline(transaction=False)
    job_ids = sorted(slots)
    for job_id in job_ids:
        keys = [job_lock(job_id, slot=slot).key for slot in range(max(slots[job_id], 1))]
        pipe.mget(keys)
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
    release_next_held(run.job_id)  # a buffering job's next run need not wait for the sweep


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
