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
from datetime import datetime

from django.conf import settings

from jobs.models import QueueState
from runs.locks import get_redis

log = logging.getLogger("takt.queue")


def queue_state() -> QueueState:
    state, _ = QueueState.objects.get_or_create(pk=1)
    return state


def pause_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:queue:paused"


def mirror(*, paused: bool | None = None, maintenance: bool | None = None) -> None:
    """Write the switches given to Redis for the workers (one round trip)."""
    pipe = get_redis().pipeline(transaction=False)
    for key, on in ((pause_key(), paused), (maintenance_key(), maintenance)):
        if on is None:
            continue
        if on:
            pipe.set(key, "1")
        else:
            pipe.delete(key)
    pipe.execute()


def pause_queue(
    *, note: str = "", by: str = "", until: datetime | None = None, now: datetime
) -> bool:
    """Pause the queue, until `until` if given (the beat resumes it then).
    Returns False if it was paused already (its note and end stay)."""
    n = QueueState.objects.filter(pk=queue_state().pk, paused=False).update(
        paused=True, pause_note=note, paused_by=by[:150], paused_at=now, paused_until=until
    )
    mirror(paused=True)
    if n:
        log.info("queue paused by %s: %s", by or "?", note)
    return bool(n)


def resume_queue(*, now: datetime) -> bool:
    """Resume the queue; returns False if it was not paused."""
    n = QueueState.objects.filter(pk=queue_state().pk, paused=True).update(
        paused=False, resumed_at=now, paused_until=None
    )
    mirror(paused=False)
    if n:
        log.info("queue resumed")
    return bool(n)


def resume_queue_if_due(*, now: datetime) -> bool:
    """Resume a queue paused until a time that has come (the beat calls
    this); compare-and-set, so two beats resume it once."""
    n = QueueState.objects.filter(pk=1, paused=True, paused_until__lte=now).update(
        paused=False, resumed_at=now, paused_until=None
    )
    if n:
        mirror(paused=False)
        log.info("queue resumed: its pause ended")
    return bool(n)


def is_paused() -> bool:
    return QueueState.objects.filter(pk=1, paused=True).exists()


# --- maintenance mode (F-29) ---------------------------------------------------
#
# While it is on (by switch, or while the file TAKT_MAINTENANCE_LOCK_FILE
# exists where the beat runs), only jobs marked allowed_during_maintenance
# start; every other start is refused and recorded as a `skipped` run
# whatever triggered it (the beat, a retry, the outbox), and enqueue_job()
# and "Run now" raise MaintenanceMode for them. A manual or API request never
# widens the allow-list. Workers see it through Redis, like the pause.


def maintenance_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:queue:maintenance"


def lock_file_present() -> bool:
    import os

    path = getattr(settings, "TAKT_MAINTENANCE_LOCK_FILE", "")
    return bool(path) and os.path.exists(path)


def set_maintenance(on: bool, *, note: str = "", now: datetime) -> bool:
    """Switch maintenance mode; returns False when it already was so."""
    changes = {"maintenance": on, "maintenance_note": note if on else ""}
    n = QueueState.objects.filter(pk=queue_state().pk, maintenance=not on).update(**changes)
    mirror(maintenance=on or lock_file_present())
    if n:
        log.info("maintenance mode %s%s", "on" if on else "off", f": {note}" if note else "")
    return bool(n)


def in_maintenance() -> bool:
    """The switch or the lock file."""
    return lock_file_present() or QueueState.objects.filter(pk=1, maintenance=True).exists()
