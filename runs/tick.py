"""One beat tick as a plain function of `now` (the one clock, runs.clock,
is read once per tick in runs.beat)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import Min

from jobs import registry
from jobs.models import QueueState, Trigger
from jobs.services import resume_due_jobs
from runs import lock_files
from runs.clock import now as shared_now
from runs.decisions import drain, record
from runs.delivery import resend_lost_messages
from runs.dispatch import claim_due_runs
from runs.models import Run, RunStatus
from runs.not_due import note_held_jobs
from runs.outbox import sweep_unpublished
from runs.publish import publish_runs
from runs.queue import mirror, resume_queue_if_due
from runs.recovery import check_lost_runs
from runs.signals import catchup_capped
from runs.stalled import repair_stalled_triggers
from scheduler_project.connections import statement_cursor

log = logging.getLogger("takt.beat")


def run_tick(*, now: datetime, hold_jobs: frozenset[int] = frozenset()) -> float:
    """Dispatch everything due at `now`, publish it, sweep the outbox,
    then move the decision log's new entries into the database (whatever
    the tick did). The due fire times of `hold_jobs` stay due
    (jobs.testing.tick holds Takt's built-in jobs). Returns the seconds
    until the next known fire time (for the sleep)."""
    try:
        return _dispatch(now=now, hold_jobs=hold_jobs)
    finally:
        _drain_decisions()


def _dispatch(*, now: datetime, hold_jobs: frozenset[int]) -> float:
    # One statement first: the next fire time from the partial index, the
    # queue switches and whether the outbox holds a due run never sent. An
    # idle tick takes no lock, opens no transaction (on SQLite, no write lock
    # every poll) and asks nothing more.
    nxt, paused, maintenance, unpublished = probe(now=now)
    # Asked whatever the switch says: while it is on, this beat still
    # reports the files it sees (and acts on a removal request), so a
    # deleted file's report does not outlive it (found by the model test).
    file_seen = _lock_file_seen()
    maintenance = maintenance or file_seen
    _mirror_pause(paused, maintenance)
    waiting_jobs = _check_lost_runs(now=now)
    _check_stalled(now=now)
    wait = _seconds_until(nxt, now=now)
    if paused:  # F-28: nothing is enqueued or sent; due times stay due
        if settings.TAKT_SCHEDULER_ENABLED and wait <= 0:
            _claim_allowed_while_paused(now=now, maintenance=maintenance, defer_jobs=hold_jobs)
        _resume_due_jobs(now=now)  # a pause with an end resumes by itself
        _note_not_due(now=now, skip_jobs=hold_jobs)
        return float(settings.TAKT_POLL_SECONDS)
    claimed = False
    if not settings.TAKT_SCHEDULER_ENABLED:  # F-30: manual runs still go out
        wait = float(settings.TAKT_POLL_SECONDS)
    elif wait <= 0:
        busy = _claim(now=now, maintenance=maintenance, defer_jobs=waiting_jobs | hold_jobs)
        claimed = True
        wait = seconds_until_next_fire(now=shared_now())
        if waiting_jobs or hold_jobs or busy:  # due times stay due: look again at the next poll
            wait = max(wait, float(settings.TAKT_POLL_SECONDS))
    if unpublished or claimed:  # the claim may have left some: the sweep looks
        sweep_unpublished(now=now, known=unpublished)
    _resume_due_jobs(now=now)
    _note_not_due(now=now, skip_jobs=hold_jobs)
    _resend_lost_messages(now=now)
    return wait


def _claim(
    *,
    now: datetime,
    maintenance: bool,
    only_targets: list[str] | None = None,
    defer_jobs: frozenset[int] = frozenset(),
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Claim due triggers in batches until none is left, publish their
    runs; the triggers of `defer_jobs` stay due. `clock` measures how long
    the tick has been claiming (see _batch_time). Returns whether a due
    trigger was left due because its job is busy (runs/busy.py)."""
    batch = settings.TAKT_CLAIM_BATCH
    started = clock()
    held: frozenset[int] = frozenset()  # left due (busy jobs): not read again this tick
    while True:
        claimed = claim_due_runs(
            now=_batch_time(now, clock() - started),
            limit=batch,
            maintenance=maintenance,
            only_targets=only_targets,
            defer_jobs=defer_jobs,
            held=held,
        )
        held |= frozenset(claimed.held)
        publish_runs(claimed.to_publish, now=shared_now())
        record(claimed.decisions)
        for job_id, name, skipped in claimed.capped:
            catchup_capped.send(sender=None, job_id=job_id, job_name=name, skipped=skipped, now=now)
        if claimed.claimed or claimed.lost_races:
            log.info(
                "dispatched %d runs (%d skipped, %d taken by another beat)",
                len(claimed.queued),
                len(claimed.skipped),
                claimed.lost_races,
            )
        if claimed.claimed + claimed.lost_races + len(claimed.held) < batch:
            return bool(held)


# A batch claimed this long after the tick began is recorded at its own time.
BATCH_CLOCK_AFTER_S = 1.0


def _batch_time(now: datetime, elapsed: float) -> datetime:
    """The time a batch is claimed and recorded at: the tick's `now`, or,
    once the tick has run for BATCH_CLOCK_AFTER_S, `now` plus the time it
    took. A tick with thousands due takes seconds; were its last batches
    recorded at the tick's start, they could look older than
    TAKT_REPUBLISH_AFTER_SECONDS in the moment between their commit and
    their published mark, and another beat's outbox sweep would take them
    for lost and send them a second time (seen with two beats and 20,000
    due at once, benchmarks/capacity.py)."""
    return now + timedelta(seconds=elapsed) if elapsed >= BATCH_CLOCK_AFTER_S else now


_drain_failing = False


def _drain_decisions() -> None:
    """F-65: the decision log's stream into its table (runs/decisions.py).
    An error is logged once until a drain succeeds again (during an outage
    every tick would fail); the entries wait in the stream."""
    global _drain_failing

    try:
        drain()
    except Exception as exc:
        if not _drain_failing:
            log.warning("could not move the decision log into the database: %s", exc)
        _drain_failing = True
    else:
        _drain_failing = False


_allowed_at = float("-inf")
ALLOWED_EVERY_S = 5.0


def _claim_allowed_while_paused(
    *, now: datetime, maintenance: bool, defer_jobs: frozenset[int] = frozenset()
) -> None:
    """While the queue is paused, the jobs on the maintenance allow-list
    still start (F-29: "resume the queue" must be able to), every
    ALLOWED_EVERY_S: the other due triggers stay due, and looking through
    them each poll would cost a scan of every due one."""
    global _allowed_at

    allowed = registry.allowed_names()
    if not allowed or time.monotonic() - _allowed_at < ALLOWED_EVERY_S:
        return
    _allowed_at = time.monotonic()
    _claim(now=now, maintenance=maintenance, only_targets=allowed, defer_jobs=defer_jobs)


_resumed_at = float("-inf")
RESUME_EVERY_S = 10.0


def _resume_due_jobs(*, now: datetime) -> None:
    """Lift job pauses and the queue's pause whose paused_until has come,
    every RESUME_EVERY_S (so an idle tick does not pay for the queries
    each poll)."""
    global _resumed_at

    if time.monotonic() - _resumed_at < RESUME_EVERY_S:
        return
    _resumed_at = time.monotonic()
    resume_due_jobs(now=now)
    resume_queue_if_due(now=now)


_not_due_at = float("-inf")
NOT_DUE_EVERY_S = 10.0


def _note_not_due(*, now: datetime, skip_jobs: frozenset[int]) -> None:
    """F-65: write the jobs held back by their pause or the queue's, once
    per spell (runs/not_due.py), every NOT_DUE_EVERY_S. An error is logged
    and the tick goes on."""
    global _not_due_at

    if time.monotonic() - _not_due_at < NOT_DUE_EVERY_S:
        return
    _not_due_at = time.monotonic()
    try:
        note_held_jobs(now=now, skip_jobs=skip_jobs)
    except Exception:
        log.exception("the check for held jobs failed")


_lost_checked_at = float("-inf")
# The jobs whose running runs the last check could not judge (Redis's data
# too young after a loss): their due fire times wait, and the check runs
# every tick, until it can.
_unjudged: frozenset[int] = frozenset()


def _check_lost_runs(*, now: datetime) -> frozenset[int]:
    """Mark lost the running runs whose worker died (runs.recovery), every
    TAKT_LOST_CHECK_SECONDS, paused or not; every tick while some could not
    be judged. Returns the jobs whose due fire times wait for a judgement:
    a `skip` job must not be skipped behind a run that may be dead (after
    a Redis loss, for TTL + 1 s). A Redis or database error is logged and
    the tick goes on; the next check tries again."""
    global _lost_checked_at, _unjudged

    interval = 0 if _unjudged else settings.TAKT_LOST_CHECK_SECONDS
    if time.monotonic() - _lost_checked_at < interval:
        return _unjudged
    _lost_checked_at = time.monotonic()
    unjudged: set[int] = set()
    try:
        check_lost_runs(now=now, unjudged=unjudged)
    except Exception:
        log.exception("the lost-run check failed")
    _unjudged = frozenset(unjudged)
    return _unjudged


_stalled_checked_at = float("-inf")
STALLED_CHECK_EVERY_S = 60.0


def _check_stalled(*, now: datetime) -> None:
    """F-111: repair (and alert) the triggers that would never fire again
    (runs/stalled.py, one indexed query), every STALLED_CHECK_EVERY_S. An
    error is logged and the tick goes on."""
    global _stalled_checked_at

    if time.monotonic() - _stalled_checked_at < STALLED_CHECK_EVERY_S:
        return
    _stalled_checked_at = time.monotonic()
    try:
        repair_stalled_triggers(now=now)
    except Exception:
        log.exception("the stalled-schedule check failed")


_resent_at = float("-inf")


def _resend_lost_messages(*, now: datetime) -> None:
    """Send again published runs whose message is gone (runs/delivery.py),
    every TAKT_RESEND_CHECK_SECONDS. A Redis error is logged and the tick
    goes on (a database error is the tick's own, as for its other steps)."""
    global _resent_at
    from redis import RedisError

    if time.monotonic() - _resent_at < settings.TAKT_RESEND_CHECK_SECONDS:
        return
    _resent_at = time.monotonic()
    try:
        resend_lost_messages(now=now)
    except RedisError:
        log.exception("could not look for lost messages")


@cache
def _probe_sql(vendor: str) -> str:
    del vendor  # one cached statement per database vendor
    q = connection.ops.quote_name
    trig, queue = q(Trigger._meta.db_table), q(QueueState._meta.db_table)
    run = q(Run._meta.db_table)
    next_col, active_col = (q(Trigger._meta.get_field(f).column) for f in ("next_run_at", "active"))
    paused_col, maint_col, pk_col = (
        q(QueueState._meta.get_field(f).column) for f in ("paused", "maintenance", "id")
    )
    status, published, scheduled = (
        q(Run._meta.get_field(f).column) for f in ("status", "published_at", "scheduled_for")
    )
    # Bare columns and literals, not `= %s`: SQLite uses a partial index only
    # when the query states its condition literally (a bound parameter makes
    # it scan).
    return (
        f"SELECT (SELECT MIN({next_col}) FROM {trig} WHERE {active_col}),"
        f" (SELECT {paused_col} FROM {queue} WHERE {pk_col} = 1),"
        f" (SELECT {maint_col} FROM {queue} WHERE {pk_col} = 1),"
        f" EXISTS (SELECT 1 FROM {run} WHERE {status} = '{RunStatus.QUEUED}'"
        f" AND {published} IS NULL AND {scheduled} <= %s)"
    )


def probe(*, now: datetime) -> tuple[datetime | None, bool, bool, bool]:
    """In one round trip: the earliest next_run_at of an active trigger,
    whether the queue is paused, whether maintenance mode is switched on,
    and whether the outbox holds a queued run due by `now` that was never
    sent (runs/outbox.py; its partial index answers)."""
    at = Run._meta.get_field("scheduled_for").get_db_prep_save(now, connection)
    with statement_cursor() as cursor:
        cursor.execute(_probe_sql(connection.vendor), [at])
        raw_next, raw_paused, raw_maintenance, raw_unpublished = cursor.fetchone()
    field = Trigger._meta.get_field("next_run_at")
    expression = field.get_col(Trigger._meta.db_table)
    value = raw_next
    for converter in connection.ops.get_db_converters(expression):
        value = converter(value, expression, connection)
    return value, bool(raw_paused), bool(raw_maintenance), bool(raw_unpublished)


_lock_reporter: list[lock_files.Reporter] = []


def _lock_file_seen() -> bool:
    """Maintenance by lock file: this beat reports the lock files it sees
    and hears of those the other live beats see (runs.lock_files); nothing
    when none is configured. Redis unreachable: this host's files decide."""
    if not lock_files.configured():
        return False
    if not _lock_reporter:
        _lock_reporter.append(lock_files.Reporter())
    try:
        return bool(_lock_reporter[0].exchange())
    except Exception as exc:
        log.warning("could not exchange the lock files the beats see: %s", exc)
        return bool(lock_files.present_here())


_mirrored_at = float("-inf")
_mirrored: tuple[bool, bool] | None = None
MIRROR_EVERY_S = 30.0


def _mirror_pause(paused: bool, maintenance: bool = False) -> None:
    """Keep the workers' copy of the switches in Redis: at once when either
    changed since this beat last wrote them (maintenance ended by deleting
    its lock file is over for the workers at this tick, not 30 s later),
    every tick while one is on (a Redis restart loses it for one poll at
    most), and now and then while both are off (a switch-off whose Redis
    write failed heals)."""
    global _mirrored_at, _mirrored

    state = (paused, maintenance)
    if (
        state == _mirrored
        and not (paused or maintenance)
        and time.monotonic() - _mirrored_at < MIRROR_EVERY_S
    ):
        return
    try:
        mirror(paused=paused, maintenance=maintenance)
        _mirrored_at, _mirrored = time.monotonic(), state
    except Exception:
        log.exception("could not write the queue switches to Redis")


def reset_periodic_passes() -> None:
    """Make the next tick run every periodic pass, as the first tick of a
    beat process does: the lost-run check, the stalled-schedule check,
    lifting the pauses that ran out, the note of the held jobs (runs/not_due.py),
    the resend of lost messages, the mirror of the queue switches and,
    while the queue is paused, the allow-list's claim. A beat runs each
    of them at most every so many seconds of its monotonic clock (the cost
    of an idle tick); jobs.testing.tick calls this so that a tick at an
    injected `now` does what is due then, however little real time passed
    since the tick before it. A beat never calls it."""
    global _allowed_at, _resumed_at, _lost_checked_at, _resent_at, _mirrored_at
    global _stalled_checked_at, _not_due_at

    _allowed_at = _resumed_at = _lost_checked_at = _resent_at = _mirrored_at = float("-inf")
    _stalled_checked_at = _not_due_at = float("-inf")


def seconds_until_next_fire(*, now: datetime) -> float:
    """From the partial index: one index probe, whatever the job count."""
    nxt = Trigger.objects.filter(active=True).aggregate(m=Min("next_run_at"))["m"]
    return _seconds_until(nxt, now=now)


def _seconds_until(nxt: datetime | None, *, now: datetime) -> float:
    if nxt is None:
        return float(settings.TAKT_POLL_SECONDS)
    return max(0.0, (nxt - now).total_seconds())
