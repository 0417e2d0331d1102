"""The queue switches for the whole cluster: pause and resume (F-28), and
maintenance mode (F-29).

The database row (QueueState, pk 1) is the truth. Workers check a mirror of
it in Redis in the same round trip that takes a job's lock (runs.locks), so
the pause costs a run nothing; the beat re-writes the mirror on every tick,
so a Redis restart cannot lose a pause for longer than one poll.

While paused: the beat claims nothing (due times stay due), the outbox sends
nothing, `enqueue_job()` and "Run now" raise QueuePaused, and a worker puts
a run it receives back as held. Running runs go on. On resume, each due
trigger is caught up once (the claim coalesces every fire time up to the
resume into one run), and held runs are sent again by the beat's sweep.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs import audit
from jobs.models import QueueState
from runs import lock_files
from runs.decisions import Decision, record
from runs.locks import get_redis
from runs.signals import maintenance_changed

log = logging.getLogger("takt.queue")


def queue_state() -> QueueState:
    state, _ = QueueState.objects.get_or_create(pk=1)
    return state


def pause_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:queue:paused"


def mirror(*, paused: bool | None = None, maintenance: bool | None = None) -> None:
    """Write the switches given to Redis for the workers (one round trip).
    Maintenance mode going on or off here (its key set or deleted by this
    call, by whichever process sees it first) sends `maintenance_changed`:
    heartbeats raises or resolves its alert (the manual's "NoLock
    detected"), and the decision log records it."""
    pipe = get_redis().pipeline(transaction=False)
    if paused:
        pipe.set(pause_key(), "1")
    elif paused is not None:
        pipe.delete(pause_key())
    if maintenance:
        pipe.set(maintenance_key(), "1", nx=True)  # True: it was off
    elif maintenance is not None:
        pipe.delete(maintenance_key())  # 1: it was on
    results = pipe.execute()
    if maintenance is not None and results[-1]:  # set where absent, or deleted where present
        _maintenance_changed(bool(maintenance))


def _maintenance_changed(on: bool) -> None:
    now = timezone.now()
    state = QueueState.objects.filter(pk=1).first()
    note = state.maintenance_note if state and state.maintenance else ""
    lock_file = lock_files.describe(lock_files.seen_in_cluster()) if on else ""
    detail = "on" if on else "off"
    if on and lock_file:
        detail += f" (lock file {lock_file})"
    if on and note:
        detail += f": {note}"
    record([Decision("maintenance", 0, detail=f"maintenance mode {detail}", at=now)])
    maintenance_changed.send(sender=None, on=on, note=note, lock_file=lock_file, now=now)


def pause_queue(
    *, note: str = "", by: str = "", until: datetime | None = None, now: datetime
) -> bool:
    """Pause the queue, until `until` if given (the beat resumes it then).
    Returns False if it was paused already (its note and end stay)."""
    with transaction.atomic():
        n = QueueState.objects.filter(pk=queue_state().pk, paused=False).update(
            paused=True, pause_note=note, paused_by=by[:150], paused_at=now, paused_until=until
        )
        _record_switch(n, by=by, note=note)
    mirror(paused=True)
    if n:
        log.info("queue paused by %s: %s", by or "?", note)
    return bool(n)


def resume_queue(*, now: datetime) -> bool:
    """Resume the queue; returns False if it was not paused."""
    with transaction.atomic():
        n = QueueState.objects.filter(pk=queue_state().pk, paused=True).update(
            paused=False, resumed_at=now, paused_until=None
        )
        _record_switch(n)
    mirror(paused=False)
    if n:
        log.info("queue resumed")
    return bool(n)


def resume_queue_if_due(*, now: datetime) -> bool:
    """Resume a queue paused until a time that has come (the beat calls
    this); compare-and-set, so two beats resume it once."""
    with transaction.atomic():
        n = QueueState.objects.filter(pk=1, paused=True, paused_until__lte=now).update(
            paused=False, resumed_at=now, paused_until=None
        )
        _record_switch(n, by="beat (the pause ended)")
    if n:
        mirror(paused=False)
        log.info("queue resumed: its pause ended")
    return bool(n)


def _record_switch(changed: int, *, by: str = "", note: str = "") -> None:
    """The audit row of a switch just flipped by compare-and-set (an
    update() sends no signal; jobs.audit), in the flip's transaction;
    `by` names who when the entry point did not (a job's run, the beat),
    and the pause's or maintenance's note is the row's unless the entry
    point gave one."""
    if changed:
        audit.record_updated(QueueState, [1], by=by, note=note)


def is_paused() -> bool:
    return QueueState.objects.filter(pk=1, paused=True).exists()


# --- maintenance mode (F-29) ---------------------------------------------------
#
# While it is on (by switch, or while the file TAKT_MAINTENANCE_LOCK_FILE
# exists where the beat runs), only jobs whose target is on the maintenance
# allow-list start (registered with allowed_during_maintenance=True; Takt's
# own: maintenance off, pause and resume the queue, runs/takt_jobs.py); every
# other start is refused and recorded as a `skipped` run whatever triggered
# it (the beat, a retry, the outbox, a dependency), and enqueue_job() and
# "Run now" raise MaintenanceMode for them. Only code widens the allow-list,
# never a request. Workers see it through Redis, like the pause. The
# allow-listed jobs start while the queue is paused too.


def maintenance_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:queue:maintenance"


def lock_file_present() -> bool:
    """Whether maintenance by lock file is on: a configured lock file exists
    here or a live beat sees one on its host (runs.lock_files)."""
    return bool(lock_files.seen_in_cluster())


def set_maintenance(on: bool, *, note: str = "", now: datetime) -> bool:
    """Switch maintenance mode; returns False when it already was so."""
    changes = {"maintenance": on, "maintenance_note": note if on else ""}
    with transaction.atomic():
        n = QueueState.objects.filter(pk=queue_state().pk, maintenance=not on).update(**changes)
        _record_switch(n, note=note)
    mirror(maintenance=on or lock_file_present())
    if n:
        log.info("maintenance mode %s%s", "on" if on else "off", f": {note}" if note else "")
    return bool(n)


def remove_lock_files(paths: list[str] | None = None) -> list[str]:
    """Delete the named configured lock files (None: all) on this host, and
    ask every beat to delete them where it sees them (runs.lock_files), so
    a file on another host goes too, at that beat's next tick. Returns the
    paths deleted here."""
    removed = []
    for path in lock_files.configured():
        if paths is None or path in paths:
            try:
                os.remove(path)
            except FileNotFoundError:
                continue
            log.info("removed the maintenance lock file %s", path)
            removed.append(path)
    if lock_files.configured():
        lock_files.request_removal(paths)
    return removed


def in_maintenance() -> bool:
    """The switch or the lock file."""
    return lock_file_present() or QueueState.objects.filter(pk=1, maintenance=True).exists()
