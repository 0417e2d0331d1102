"""Applying the overlap policy (F-23) to the database: counting a job's
active runs, admitting a new run, holding a run back until the job is free,
sending the next held run when it is, and cancelling the runs a
`cancel_other` run replaces (with the lock release and the stop that an
operator's cancel, runs/cancel.py, shares). The decisions themselves are
the pure functions in runs/core/admission.py.

Held runs are `queued` with `held` set and no published_at. A held run
that waits for its job (not for a slot: runs/waiting.py) is sent only when
its turn has come (`release_next_held`): no run of its job running, and a
lock slot of the job free for it once the runs ahead of it have theirs:
the runs queued and due that were sent or wait for a slot
(`queued_ahead`), plus the slots held in Redis, fewer than the job's
slots (`job_slots`: one; `max_instances` under `allow`). Redis is asked because a
run's end is recorded before its worker frees its slot. Sent any
earlier, its worker would find the lock taken and, under `skip`, end it
skipped: the runs of one claim would skip each other (issue 28). Whoever
ends or parks a run of a buffering job sends the next held one once its
slot is free; the beat's sweep does the same every poll for any job whose
held runs' turn may have come (a `skip` job's catch-up runs, a worker
that died between the two steps), so a held run never waits for ever.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from celery import current_app
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, OuterRef, Q
from redis import RedisError

from jobs.core.rules import MAX_INSTANCES, Overlap
from jobs.models import Job
from jobs.specs import overlap_rules
from runs.clock import now as shared_now
from runs.core.admission import Decision, compute_admission
from runs.locks import release_cancelled, slots_taken
from runs.marks import forget_mark
from runs.models import Run, RunStatus, task_id_for
from runs.publish import publish_after_commit

log = logging.getLogger("takt.runs")


def activity(job_ids: list[int], *, now: datetime) -> dict[int, tuple[int, int]]:
    """job id -> (running runs, queued runs already due, held or not); one
    query. A run queued for a later time (run_at, a retry's delay) does not
    count until it is due."""
    rows = (
        Run.objects.filter(job_id__in=job_ids)
        .filter(Q(status=RunStatus.RUNNING) | Q(status=RunStatus.QUEUED, scheduled_for__lte=now))
        .values("job_id", "status")
        .annotate(n=Count("id"))
    )
    counts: dict[int, Counter[str]] = {}
    for row in rows:
        counts.setdefault(row["job_id"], Counter())[row["status"]] = row["n"]
    return {job_id: (c[RunStatus.RUNNING], c[RunStatus.QUEUED]) for job_id, c in counts.items()}


def admit(job: Job, *, running: int, waiting: int) -> Decision:
    return compute_admission(overlap_rules(job), running=running, waiting=waiting)


def cancel_active_runs(job_id: int, *, keep: int | None, now: datetime, reason: str) -> list[str]:
    """Cancel the job's queued and running runs except `keep` (compare-and-
    set per status). The running ones give up their lock slots after commit
    (release_cancelled_locks). Returns their Celery task ids, to be stopped
    after commit (revoke_after_commit)."""
    base = Run.objects.filter(job_id=job_id).exclude(pk=keep)
    fields = {
        "status": RunStatus.CANCELLED,
        "finished_at": now,
        "message": reason,
        "cancelled_by": REPLACED_BY,
    }
    base.filter(status=RunStatus.QUEUED).update(**fields, held=False)
    running_ids = [
        pk
        for pk, started_at in base.filter(status=RunStatus.RUNNING).values_list("pk", "started_at")
        if Run.objects.filter(pk=pk, status=RunStatus.RUNNING).update(
            **fields, duration_s=run_duration_s(started_at, now)
        )
    ]
    if running_ids:
        log.info(
            "cancelled %d running runs of job %s",
            len(running_ids),
            job_id,
            extra={"job_id": job_id},
        )

        def release() -> None:
            try:
                release_cancelled_locks(job_id, running_ids, now=now)
            except Exception:  # their keepers' renewals then fail; the TTL frees the slots
                log.exception("could not free the lock slots of cancelled runs %s", running_ids)

        transaction.on_commit(release)
    return [task_id_for(pk) for pk in running_ids]


def run_duration_s(started_at: datetime | None, ended_at: datetime) -> float | None:
    """Seconds from start to end (never negative across machines' clocks);
    None for a run that never started."""
    if started_at is None:
        return None
    return max((ended_at - started_at).total_seconds(), 0.0)


# Who cancelled a run that a cancel_other run replaced (Run.cancelled_by).
REPLACED_BY = "takt (overlap policy cancel_other)"
# The stop signal of a cancelled run: Celery's soft time limit in a prefork
# child (SoftTimeLimitExceeded in the job, see runs/stopping.py).
STOP_SIGNAL = "SIGUSR1"


def release_cancelled_locks(job_id: int, run_ids: list[int], *, now: datetime) -> int:
    """Free the lock slots of cancelled runs and leave each its cancel
    marker (runs.locks.release_cancelled, one round trip). The marker lives
    long enough for the run's keeper to see it at a renewal and to outlast
    the grace period. Returns the slots freed; raises redis.RedisError."""
    ttl_s = settings.TAKT_CANCEL_GRACE_SECONDS + 3 * settings.TAKT_LOCK_TTL_SECONDS + 60
    return release_cancelled(
        job_id, run_ids, marker=now.isoformat(), marker_ttl_s=ttl_s, slots=MAX_INSTANCES
    )


def revoke_after_commit(task_ids: list[str]) -> None:
    """Tell the cancelled runs' processes to stop once the cancel is
    committed: Celery's revoke with terminate sends STOP_SIGNAL to the pool
    child running each (a worker that misses the broadcast learns it from
    the run's cancel marker, runs/stopping.py)."""
    if not task_ids:
        return

    def revoke() -> None:
        try:
            current_app.control.revoke(task_ids, terminate=True, signal=STOP_SIGNAL)
        except Exception:  # the runs are cancelled either way; their end is ignored
            log.exception("could not ask the workers to stop %s", task_ids)

    transaction.on_commit(revoke)


def hold_run(run: Run, *, waiting_for: str = "") -> bool:
    """running → queued and held: a worker found the queue paused, the
    job's lock taken and the policy says wait (buffer_one, buffer_all, or a
    retry), or (`waiting_for`, F-31, F-34) a slot missing. Compare-and-set.
    The run's message mark goes too (runs/marks.py): its next publish
    writes a fresh one, not one naming the worker that held it."""
    held = bool(
        Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
            status=RunStatus.QUEUED,
            held=True,
            waiting_for=waiting_for,
            started_at=None,
            worker="",
            published_at=None,
        )
    )
    if held:
        _forget_mark(run.pk)
    return held


def _forget_mark(run_id: int) -> None:
    try:
        forget_mark(run_id)
    except Exception:  # never fail the hold over a mark
        log.exception("could not drop the message mark of run %s", run_id, extra={"run_id": run_id})


def queued_ahead(*, now: datetime) -> Q:
    """The queued runs of a job that its held runs (waiting for the job)
    let go first: due, and either sent (not held) or held for a slot (F-31,
    F-34), which take a lock slot of the job when they start."""
    return Q(status=RunStatus.QUEUED, scheduled_for__lte=now) & ~Q(held=True, waiting_for="")


def release_next_held(job_id: int, *, now: datetime | None = None) -> Run | None:
    """Send the job's next held run (by priority, then age) if its turn has
    come; returns the run sent, if any.

    1. One query: no held run waits for the job → None (a run's end pays
       no more than this).
    2. In one transaction holding the job's row (SELECT FOR UPDATE on
       PostgreSQL; SQLite's IMMEDIATE transactions serialize writers), so
       two senders at once (two beats' sweeps, a run's end) never send two
       runs for one slot: the second counts the first one's run as ahead.
    3. A run of the job is running → None: the runs of one claim go one by
       one.
    4. The runs queued ahead (`queued_ahead`) plus the job's lock slots
       held in Redis leave no slot for it → None. A run's end is recorded
       in the database before its worker frees its slot; the ending run
       sends the held one after freeing it (a buffering job), else the next
       sweep does. Redis unreachable → None.
    5. The candidate's row is taken with SKIP LOCKED (a cancel that holds
       it waits for this job's row: no deadlock), unheld, and published
       after the commit."""
    now = now or shared_now()
    waiting = Run.objects.filter(job_id=job_id, status=RunStatus.QUEUED, held=True, waiting_for="")
    if not waiting.exists():
        return None
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        runs = Run.objects.filter(job_id=job_id)
        if job is None or runs.filter(status=RunStatus.RUNNING).exists():
            return None
        slots = job_slots(job)
        ahead = runs.filter(queued_ahead(now=now)).count()
        candidate = waiting.order_by("priority", "enqueued_at", "pk").first()
        if candidate is None or ahead >= slots or ahead + _slots_taken(job) >= slots:
            return None
        mine = Run.objects.filter(pk=candidate.pk, held=True, status=RunStatus.QUEUED)
        if connection.features.has_select_for_update_skip_locked:
            if not list(mine.select_for_update(skip_locked=True).values_list("pk", flat=True)):
                return None  # being cancelled meanwhile: the cancel sends the next one
        if not mine.update(held=False):
            return None  # sent or cancelled meanwhile
        candidate.held, candidate.job = False, job
        publish_after_commit([candidate])
    log.info(
        "sending held run %s of job %s",
        candidate.pk,
        job_id,
        extra={"job_id": job_id, "run_id": candidate.pk},
    )
    return candidate


def job_slots(job: Job) -> int:
    """How many runs of the job may hold its lock at once, as the worker
    counts them (jobs.specs.overlap_rules: `max_instances` under `allow`,
    else one)."""
    return int(overlap_rules(job).max_instances)


def _slots_taken(job: Job) -> int:
    """Step 4 of release_next_held: the job's lock slots held in Redis
    (all of them when Redis cannot be asked)."""
    slots = job_slots(job)
    try:
        return slots_taken(job.pk, slots=slots)
    except RedisError:
        log.warning(
            "cannot ask Redis whether job %s's lock is free: its held run waits",
            job.pk,
            extra={"job_id": job.pk},
        )
        return slots


def release_stranded(*, now: datetime, limit: int = 100) -> int:
    """The sweep: send the next held run of every job whose held runs'
    turn may have come (nothing running, and for a one-slot job nothing
    queued ahead; release_next_held asks Redis too). Costs one indexed
    probe when none wait."""
    of_job = Run.objects.filter(job_id=OuterRef("job_id"))
    running = Exists(of_job.filter(status=RunStatus.RUNNING))
    ahead = Exists(of_job.filter(queued_ahead(now=now)))
    job_ids = list(
        Run.objects.filter(status=RunStatus.QUEUED, held=True, scheduled_for__lte=now)
        .filter(waiting_for="")  # a run waiting for a slot: runs/waiting.py
        .filter(~running)
        .filter(Q(job__overlap_policy=Overlap.ALLOW, job__max_instances__gt=1) | ~ahead)
        .order_by()  # no default ordering: DISTINCT is per job
        .values_list("job_id", flat=True)
        .distinct()[:limit]
    )
    return sum(1 for job_id in job_ids if release_next_held(job_id, now=now) is not None)
