"""Retention (F-52, F-72): finished runs older than TAKT_RETENTION_DAYS are
deleted in batches, oldest first, each batch announced by an audit row
(runs.models.AuditRecord) that is committed before the batch is deleted.
If the audit row cannot be written, the batch stays, and so do the runs
after it, until the next pass."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from runs.models import FINISHED_STATUSES, AuditRecord, Run

log = logging.getLogger("takt.maintenance")

DELETE_RUNS = "delete runs"
DEFAULT_RETENTION_DAYS = 14


class AuditFailed(Exception):
    """The audit row announcing a batch could not be written: the batch was
    not deleted."""


@dataclass
class Deleted:
    """What a cleanup did so far (kept up to date batch by batch, so a
    cleanup that fails half-way still says what it deleted)."""

    runs: int = 0
    batches: int = 0


def retention_days() -> int:
    return int(getattr(settings, "TAKT_RETENTION_DAYS", DEFAULT_RETENTION_DAYS))


def expired_runs(*, now: datetime) -> tuple[datetime, QuerySet[Run]]:
    """(cut-off, queryset): the finished runs that ended before now minus
    the retention period."""
    cutoff = now - timedelta(days=retention_days())
    return cutoff, Run.objects.filter(status__in=FINISHED_STATUSES, finished_at__lt=cutoff)


def count_expired_runs(*, now: datetime) -> int:
    """How many runs a cleanup at `now` would delete (for --dry-run)."""
    return expired_runs(now=now)[1].count()


def delete_expired_runs(
    done: Deleted,
    *,
    now: datetime,
    batch: int,
    by: str,
    on_batch: Callable[[Deleted], None] | None = None,
) -> None:
    """Delete the finished runs past retention, `batch` at a time, oldest
    (lowest id) first; `done` counts what was deleted, and `on_batch(done)`
    is told after each batch (progress, F-93).

    Per batch:

    1. Read the ids of the next `batch` expired runs (by primary key, so
       each batch is one short DELETE … WHERE id IN (…) and no statement
       holds the table for long).
    2. Write its audit row (count, first and last id, the cut-off, `by`) in
       its own transaction. If that fails, raise AuditFailed: this batch and
       the rest stay until the next pass.
    3. Delete the batch in a second transaction, re-checking that each run
       is still finished and past the cut-off.

    A crash between 2 and 3 leaves an audit row for a batch that was not
    deleted; the next pass announces it again. Runs that retry a deleted
    run lose their `retry_of` link (SET NULL)."""
    cutoff, expired = expired_runs(now=now)
    while True:
        ids = list(expired.order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return
        detail = (
            f"finished runs that ended before {cutoff.isoformat(timespec='seconds')}"
            f" (retention {retention_days()} days)"
        )
        try:
            with transaction.atomic():
                AuditRecord.objects.create(
                    recorded_at=now,
                    action=DELETE_RUNS,
                    count=len(ids),
                    first_id=ids[0],
                    last_id=ids[-1],
                    detail=detail,
                    by=by,
                )
        except Exception as exc:
            raise AuditFailed(
                f"could not write the audit row, so the batch of {len(ids)} runs"
                f" (#{ids[0]} to #{ids[-1]}) and the runs after it were kept:"
                f" {type(exc).__name__}: {exc}"
            ) from exc
        with transaction.atomic():
            _, by_model = Run.objects.filter(
                pk__in=ids, status__in=FINISHED_STATUSES, finished_at__lt=cutoff
            ).delete()
        deleted = by_model.get(Run._meta.label, 0)
        done.runs += deleted
        done.batches += 1
        log.info("deleted %d finished runs (#%d to #%d)", deleted, ids[0], ids[-1])
        if on_batch is not None:
            on_batch(done)
        if len(ids) < batch:
            return
