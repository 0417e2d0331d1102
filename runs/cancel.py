"""Cancelling a queued or running run (F-50's `cancelled`): the one service
behind the admin's action, `POST /api/v1/runs/<id>/cancel` and
`manage.py cancel_run`.

`cancel_run(run_id, by=…, now=…)`:

1. Loads the run. An unknown id raises RunNotFound, a run that has ended
   RunNotCancellable (naming its status and end); nothing changes.
2. In one transaction, by compare-and-set from the status it was read with
   (queued or running); a run that moved on meanwhile (a worker started it,
   or it ended) is read again, so the caller always sees the truth:

   a. `cancelled_by` is set and `held` cleared, where the status is still
      the one read (0 rows: back to 1);
   b. a running run gives up its job's lock at once: the slots whose token
      names it are deleted and its cancel marker is set, in one Redis round
      trip (runs.overlap.release_cancelled_locks). Redis unreachable:
      RedisUnreachable, the transaction rolls back, nothing changes;
   c. the run ends `cancelled` with finished_at, its duration if it had
      started and the message "cancelled by <by>", through
      runs.ending.finish_run: interval triggers anchored on run ends move
      on; no retry; the job's failure streak is untouched (a cancel is not
      a failure); `run_finished` goes out (heartbeats record nothing: a
      cancelled run is not a report; a long-run alert is resolved);
   d. a parent run's active child is cancelled with it (F-04);
   e. the job's next held run is sent after commit (buffer policies).
3. After commit: the decision log's `cancelled` entry, and for a running run
   Celery's revoke to its worker, which stops the job (runs/stopping.py).

Its errors are TaktErrors whose text is the whole message for an operator.
"""

from __future__ import annotations

import logging
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import redis
from django.db import transaction
from django.utils.translation import gettext

from jobs.errors import InvalidInput, TaktError
from runs.core.messages import utc_text
from runs.decisions import Decision, record
from runs.ending import finish_run
from runs.labels import status_word
from runs.locks import get_redis
from runs.models import Run, RunStatus, task_id_for
from runs.overlap import release_cancelled_locks, release_next_held, revoke_after_commit
from runs.redis_client import redis_location

log = logging.getLogger("takt.runs")

CANCELLABLE = (RunStatus.QUEUED, RunStatus.RUNNING)
ATTEMPTS = 3  # reads of a run that keeps moving on under the cancel


class RunNotFound(TaktError, LookupError):
    """No run has this id."""


class RunNotCancellable(TaktError):
    """The run has ended; `status` is the status it ended with."""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status


class RedisUnreachable(TaktError):
    """Redis could not be reached: nothing was cancelled."""


def cancel_run(run_id: int, *, by: str, now: datetime) -> Run:
    """Cancel run `run_id` on behalf of `by` (a user name, `token:<name>`,
    a command's --by; at most 200 characters are kept) at `now` (aware
    UTC). Returns the cancelled run. Raises RunNotFound, RunNotCancellable,
    RedisUnreachable, InvalidInput("by") for an empty `by`, or a plain
    TaktError for a run that moved on under each of ATTEMPTS reads; see the
    module docstring for the steps."""
    if not isinstance(by, str) or not by.strip():
        raise InvalidInput("by", "must name who cancels the run")
    by = by.strip()[:200]
    for _attempt in range(ATTEMPTS):
        run = Run.objects.select_related("job").filter(pk=run_id).first()
        if run is None:
            raise RunNotFound(gettext("run #%(id)s does not exist") % {"id": run_id})
        if run.status not in CANCELLABLE:
            raise RunNotCancellable(_ended(run), status=run.status)
        with transaction.atomic():
            was = _cancel(run, by=by, now=now)
        if was is not None:
            break
    else:  # held and sent again between each read: rare, and safe to retry
        raise TaktError(
            gettext("run #%(id)s kept changing its status while being cancelled; try again")
            % {"id": run_id}
        )
    log.info(
        "run %s of job %s cancelled by %s (it was %s)",
        run.pk,
        run.job_id,
        by,
        was,
        extra={"job_id": run.job_id, "run_id": run.pk},
    )
    return Run.objects.select_related("job").get(pk=run.pk)


def _cancel(run: Run, *, by: str, now: datetime) -> str | None:
    """Step 2 inside the caller's transaction. Returns the status the run
    was cancelled from, or None when it had moved on from the one read."""
    was = run.status
    if not Run.objects.filter(pk=run.pk, status=was).update(cancelled_by=by, held=False):
        return None
    run.cancelled_by, run.held = by, False
    try:
        if was == RunStatus.RUNNING:
            release_cancelled_locks(run.job_id, [run.pk], now=now)
        else:
            get_redis().ping()  # the same answer whatever the status: no Redis, no change
    except redis.RedisError as exc:
        raise RedisUnreachable(
            gettext("cannot reach Redis at %(location)s (%(error)s): run #%(id)s was not cancelled")
            % {"location": redis_location(redacted_url)[0], "error": exc, "id": run.pk}
        ) from None
    message = (
        f"cancelled by {by}" if was == RunStatus.RUNNING else f"cancelled by {by} before it started"
    )
    finish_run(run, status=RunStatus.CANCELLED, from_status=was, now=now, message=message)
    # A parent run (F-04) takes its active child along (and that one its own).
    for child in Run.objects.select_related("job").filter(
        cause_id=run.pk, job__parent_id=run.job_id, status__in=CANCELLABLE
    ):
        _cancel(child, by=f"{by} (with its parent run #{run.pk})", now=now)
    release_next_held(run.job_id)
    decision = Decision("cancelled", run.job_id, run.pk, detail=f"by {by}; it was {was}", at=now)
    transaction.on_commit(lambda: record([decision]))
    if was == RunStatus.RUNNING:
        revoke_after_commit([task_id_for(run.pk)])
    return was


def _ended(run: Run) -> str:
    """Why `run` cannot be cancelled, in the active language (the admin's
    and the API's reader; a command's is English). The UTC time stays in
    the form the admin recognises and shows in the reader's zone."""
    params = {"id": run.pk, "status": status_word(run.status)}
    if run.finished_at is None:
        text = gettext(
            "run #%(id)s already ended %(status)s; only a queued or running run can be cancelled"
        )
    else:
        params["at"] = utc_text(run.finished_at)
        text = gettext(
            "run #%(id)s already ended %(status)s at %(at)s;"
            " only a queued or running run can be cancelled"
        )
    return text % params


def redacted_url(url: str) -> str:
    """`url` without its password, fit for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))
