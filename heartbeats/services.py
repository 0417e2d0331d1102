"""Writes to heartbeats. A heartbeat that cannot be written never fails the
run it reports (F-60)."""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from runs.models import Run, RunStatus

from .models import Heartbeat

log = logging.getLogger("takt.heartbeats")

REPORTED_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)


def record_run_heartbeat(run: Run) -> bool:
    """Fold a finished run into its job's heartbeat (created by the first
    report). Skipped and cancelled runs are not reports. Returns whether a
    heartbeat was written; never raises."""
    if run.status not in REPORTED_STATUSES:
        return False
    failed = run.status != RunStatus.SUCCEEDED
    values = {
        "job_id": run.job_id,
        "name": run.job.name,
        "last_run_at": run.finished_at,
        "last_status": run.status,
        "last_result": (run.message or str(run.result or ""))[:2000],
        "last_run_id": run.pk,
        "deadline_s": run.job.heartbeat_deadline_s,
        "last_success_at": None if failed else run.finished_at,
        "failure_count": 1 if failed else 0,
        "updated_at": timezone.now(),
    }
    try:
        if connection.vendor in UPSERT_VENDORS:
            _upsert(values)
        else:
            _update_or_create(values)
        return True
    except Exception:
        log.exception("writing the heartbeat of run %s failed", run.pk)
    return False


# One statement per report where the database has INSERT … ON CONFLICT: it
# runs after every run, and an ORM update with F() expressions cost a third
# of a no-op run's time on the worker (benchmarks/README.md).
UPSERT_VENDORS = ("postgresql", "sqlite")


@cache
def _upsert_sql(vendor: str) -> str:
    del vendor  # cached per database vendor
    q = connection.ops.quote_name
    table = q(Heartbeat._meta.db_table)

    def col(name: str) -> str:
        return q(Heartbeat._meta.get_field(name).column)

    names = ", ".join(col(f) for f in _UPSERT_FIELDS)
    placeholders = ", ".join(["%s"] * len(_UPSERT_FIELDS))
    replaced = [
        f for f in _UPSERT_FIELDS if f not in ("job_id", "last_success_at", "failure_count")
    ]
    updates = [f"{col(f)} = excluded.{col(f)}" for f in replaced] + [
        f"{col('run_count')} = {table}.{col('run_count')} + 1",
        f"{col('failure_count')} = {table}.{col('failure_count')} + excluded.{col('failure_count')}",
        f"{col('last_success_at')} = COALESCE(excluded.{col('last_success_at')},"
        f" {table}.{col('last_success_at')})",
    ]
    return (
        f"INSERT INTO {table} ({names}, {col('run_count')}) VALUES ({placeholders}, 1)"
        f" ON CONFLICT ({col('job_id')}) DO UPDATE SET {', '.join(updates)}"
    )


_UPSERT_FIELDS = (
    "job_id",
    "name",
    "last_run_at",
    "last_status",
    "last_result",
    "last_run_id",
    "deadline_s",
    "last_success_at",
    "failure_count",
    "updated_at",
)


def _upsert(values: dict[str, Any]) -> None:
    params = [
        Heartbeat._meta.get_field(name).get_db_prep_save(values[name], connection)
        for name in _UPSERT_FIELDS
    ]
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(connection.vendor), params)


def _update_or_create(values: dict[str, Any]) -> None:
    """The same through the ORM, for other databases."""
    changes = {k: v for k, v in values.items() if k not in ("job_id", "updated_at")}
    if changes["last_success_at"] is None:
        del changes["last_success_at"]
    failed = changes.pop("failure_count")
    counted = {"run_count": F("run_count") + 1, "failure_count": F("failure_count") + failed}
    if Heartbeat.objects.filter(job_id=values["job_id"]).update(**changes, **counted):
        return
    try:
        with transaction.atomic():  # the first report creates the row
            Heartbeat.objects.create(
                job_id=values["job_id"], **changes, run_count=1, failure_count=failed
            )
    except IntegrityError:  # another worker's first report was quicker
        Heartbeat.objects.filter(job_id=values["job_id"]).update(**changes, **counted)


def on_run_finished(sender: Any, run: Run, **kwargs: Any) -> None:
    """Receiver of runs.signals.run_finished."""
    record_run_heartbeat(run)
