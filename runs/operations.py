"""Long operations as runs (F-93): a backfill, a bulk "Run now", a re-run of
failed runs and an import of jobs run as runs of the built-in job "Takt operations" (key
``takt.operations``, made by jobs/migrations/0010), so each is recorded,
survives the browser closing, runs on a worker, and shows its output and
progress live on its run's page.

=============  ==========================================================
kind           params
=============  ==========================================================
``backfill``   ``jobs`` (ids), ``start``, ``end`` (ISO-8601 with an offset)
``bulk_run``   ``jobs`` (ids): a manual run of each
``rerun_failed``  ``jobs`` (ids), ``since`` (ISO-8601 with an offset): each
               job's failed, timed-out and lost runs since then that nothing
               repeats yet, run again (runs/rerun.py)
``import_jobs``  ``text`` (YAML or JSON, the export format), ``format``
               (``yaml`` or ``json``), ``source`` (a label, e.g. the file name)
=============  ==========================================================

`start_operation` checks the params and starts a manual run of the
operations job (also while it is disabled, as any "Run now"); the run's
params are the operation's, with ``operation`` (the kind); who started it
is the run's ``started_by``, a field no caller can write. The
same operation (kind and params) started again while its run is queued or
running, or within GUARD_S of its start, returns that run instead
(`run.deduplicated`): a double click starts one. The guard is the run's
dedupe key (enqueue_job, F-43), taken off a finished run once GUARD_S is
over, so the same backfill can be started again later.

The operations job's target ``takt.operation`` (runs/takt_jobs.py) calls
`perform` (runs/operation_kinds.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils.translation import gettext

from jobs.errors import InvalidInput, TaktError
from jobs.exchange import FORMATS
from jobs.models import Job
from runs.models import ACTIVE_STATUSES, Run, RunTrigger
from runs.services import enqueue_job

log = logging.getLogger("takt.operations")

OPERATIONS_KEY = "takt.operations"
OPERATIONS_TARGET = "takt.operation"
KINDS = ("backfill", "bulk_run", "rerun_failed", "import_jobs")
GUARD_S = 10
MAX_JOBS = 10_000  # ids in one backfill or bulk run


def operations_job() -> Job:
    """The built-in "Takt operations" job. Raises TaktError if it is missing."""
    job = Job.objects.filter(key=OPERATIONS_KEY).first()
    if job is None:
        raise TaktError(
            f"the built-in job 'Takt operations' (key {OPERATIONS_KEY}) is missing:"
            " run manage.py migrate"
        )
    return job


def check_operation(kind: object, params: object, *, now: datetime) -> dict[str, Any]:
    """The operation's params, checked and in their stored form (ids as a
    list without repeats, times as ISO-8601 text). Raises InvalidInput
    naming the field: `kind`, or a field of `params`."""
    if kind not in KINDS:
        raise InvalidInput("kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(params, dict):
        raise InvalidInput("params", f"must be a dict, got {type(params).__name__}")
    if kind == "import_jobs":
        text, fmt = params.get("text"), params.get("format", "yaml")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("text", gettext("give the jobs to import (YAML or JSON text)"))
        if fmt not in FORMATS:
            raise InvalidInput("format", f"must be one of {', '.join(FORMATS)}, got {fmt!r}")
        return {"text": text, "format": fmt, "source": str(params.get("source") or "")[:200]}
    checked: dict[str, Any] = {"jobs": _job_ids(params.get("jobs"))}
    if kind == "backfill":
        start, end = moment(params.get("start"), "start"), moment(params.get("end"), "end")
        if end < start:
            raise InvalidInput("end", gettext("must not be before the start"))
        if end > now:
            raise InvalidInput("end", gettext("must not be in the future"))
        checked.update(start=start.isoformat(), end=end.isoformat())
    if kind == "rerun_failed":
        since = moment(params.get("since"), "since")
        if since > now:
            raise InvalidInput("since", gettext("must not be in the future"))
        checked.update(since=since.isoformat())
    return checked


def _job_ids(value: object) -> list[int]:
    if not isinstance(value, list | tuple) or not value:
        raise InvalidInput("jobs", gettext("choose at least one job"))
    bad = [v for v in value if isinstance(v, bool) or not isinstance(v, int)]
    if bad:
        text = gettext("must be job ids (whole numbers), got %(value)r")
        raise InvalidInput("jobs", text % {"value": bad[0]})
    ids = list(dict.fromkeys(value))
    if len(ids) > MAX_JOBS:
        text = gettext("at most %(max)d jobs at once, got %(count)d")
        raise InvalidInput("jobs", text % {"max": MAX_JOBS, "count": len(ids)})
    known = set(Job.objects.filter(pk__in=ids).values_list("pk", flat=True))
    missing = [pk for pk in ids if pk not in known]
    if missing:
        text = gettext("no job with id %(ids)s") % {"ids": ", ".join(map(str, missing[:10]))}
        raise InvalidInput("jobs", text)
    return ids


def moment(value: object, name: str) -> datetime:
    """An aware datetime from a datetime or ISO-8601 text; InvalidInput naming `name`."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            text = gettext("not an ISO-8601 date and time: %(value)r") % {"value": value}
            raise InvalidInput(name, text) from None
    if not isinstance(value, datetime):
        raise InvalidInput(name, gettext("give a date and time"))
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(name, gettext("must include a time zone"))
    return value


def guard_key(kind: str, checked: dict[str, Any]) -> str:
    """The dedupe key of an operation: the same for the same kind and params."""
    text = json.dumps({"operation": kind, **checked}, sort_keys=True, ensure_ascii=False)
    return f"operation:{kind}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def start_operation(kind: str, params: dict[str, Any], *, by: str, now: datetime) -> Run:
    """Start operation `kind` with `params` as a run of the operations job
    (see the module docstring); `by` (a user name) is the run's
    `started_by`.
    Returns the run: queued (sent to the workers), or the identical
    operation's run (`run.deduplicated` True). Raises InvalidInput naming
    the field, TaktError when the operations job is missing, and, as
    enqueue_job does, QueuePaused or MaintenanceMode."""
    checked = check_operation(kind, params, now=now)
    job = operations_job()
    key = guard_key(kind, checked)
    # A finished run keeps the key only for GUARD_S; then the key is free
    # for the next identical operation.
    over = now - timedelta(seconds=GUARD_S)
    Run.objects.filter(job=job, dedupe_key=key, enqueued_at__lte=over).exclude(
        status__in=ACTIVE_STATUSES
    ).update(dedupe_key="")
    # Who started it is the run's started_by, which no caller writes: set in
    # the transaction that inserts the run, so the worker (sent the run at
    # the commit) reads it. Its rights are checked again when it runs.
    with transaction.atomic():
        run = enqueue_job(
            job,
            params={"operation": kind, **checked},
            trigger=RunTrigger.MANUAL,
            dedupe_key=key,
            now=now,
        )
        if not getattr(run, "deduplicated", False):
            Run.objects.filter(pk=run.pk).update(started_by=by[:150])
            run.started_by = by[:150]
    extra = {"job_id": job.pk, "run_id": run.pk}
    if getattr(run, "deduplicated", False):
        log.info("operation %s already started as run %s", kind, run.pk, extra=extra)
    else:
        log.info("operation %s started by %s as run %s", kind, by, run.pk, extra=extra)
    return run
