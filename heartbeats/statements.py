"""The heartbeat write of every finished run, in one statement where the
database has INSERT … ON CONFLICT … RETURNING (PostgreSQL, SQLite ≥ 3.35):
it runs after every run, and an ORM update with F() expressions cost a third
of a no-op run's time on the worker (benchmarks/README.md). Other databases
take the ORM path, which does the same in two or three statements.

Both return what the alerting after the report needs (`Reported`), so the
common case — a success after a success — costs no further statement.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from django.db import IntegrityError, connection, transaction
from django.db.models import F

from heartbeats.models import Heartbeat
from scheduler_project.connections import statement_cursor


class Reported(NamedTuple):
    """The heartbeat row just after a report."""

    id: int
    state: str  # as stored before the report (a first report stores its own)
    consecutive_failures: int  # including this report
    alert_after_failures: int | None
    paused: bool
    grace_s: int | None


UPSERT_FIELDS = (
    "job_id",
    "name",
    "last_run_at",
    "last_started_at",
    "last_status",
    "last_result",
    "last_run_id",
    "deadline_s",
    "last_success_at",
    "failure_count",
    "consecutive_failures",
    "state",
    "paused",
    "updated_at",
)
RETURNED_FIELDS = Reported._fields
# Not replaced on a conflict: counted, kept when empty, or only set by the insert.
_KEPT = ("job_id", "last_success_at", "last_started_at", "failure_count", "consecutive_failures")
_INSERT_ONLY = ("state", "paused")


@cache
def _upsert_sql(vendor: str, after_end: bool = False) -> str:
    """The upsert; `after_end`: its values selected from the CTE `ended`
    (runs.statements.cas_update_with, PostgreSQL), so it writes only when
    the run's end was recorded."""
    del vendor  # cached per database vendor
    q = connection.ops.quote_name
    table = q(Heartbeat._meta.db_table)

    def col(name: str) -> str:
        return q(Heartbeat._meta.get_field(name).column)

    def old(name: str) -> str:
        return f"{table}.{col(name)}"

    def new(name: str) -> str:
        return f"excluded.{col(name)}"

    names = ", ".join(col(f) for f in UPSERT_FIELDS)
    placeholders = ", ".join(["%s"] * len(UPSERT_FIELDS))
    replaced = [f for f in UPSERT_FIELDS if f not in _KEPT + _INSERT_ONLY]
    updates = [f"{col(f)} = {new(f)}" for f in replaced] + [
        f"{col('run_count')} = {old('run_count')} + 1",
        f"{col('failure_count')} = {old('failure_count')} + {new('failure_count')}",
        f"{col('consecutive_failures')} = CASE WHEN {new('failure_count')} > 0"
        f" THEN {old('consecutive_failures')} + 1 ELSE 0 END",
        f"{col('last_success_at')} = COALESCE({new('last_success_at')}, {old('last_success_at')})",
        f"{col('last_started_at')} = COALESCE({new('last_started_at')}, {old('last_started_at')})",
    ]
    returning = ", ".join(col(f) for f in RETURNED_FIELDS)
    if after_end:
        typed = ", ".join(
            f"CAST(%s AS {Heartbeat._meta.get_field(f).db_type(connection)})" for f in UPSERT_FIELDS
        )
        source = f"SELECT {typed}, 1 FROM ended"
    else:
        source = f"VALUES ({placeholders}, 1)"
    return (
        f"INSERT INTO {table} ({names}, {col('run_count')}) {source}"
        f" ON CONFLICT ({col('job_id')}) DO UPDATE SET {', '.join(updates)}"
        f" RETURNING {returning}"
    )


def upsert_after_end(values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The upsert of `values` as the statement that goes with a run's end
    (runs.signals.EndCompanion): its SQL and parameters."""
    return _upsert_sql(connection.vendor, after_end=True), _params(values)


def _params(values: dict[str, Any]) -> list[Any]:
    return [
        Heartbeat._meta.get_field(name).get_db_prep_save(values[name], connection)
        for name in UPSERT_FIELDS
    ]


def upsert_heartbeat(values: dict[str, Any]) -> Reported:
    """One INSERT … ON CONFLICT (job) DO UPDATE … RETURNING. `values` has
    every field of UPSERT_FIELDS; failure_count and consecutive_failures are
    1 for a failure and 0 for a success; `state` and `paused` are a first
    report's (later reports leave them alone: the caller stores a changed
    state, an operator pauses)."""
    with statement_cursor() as cursor:
        cursor.execute(_upsert_sql(connection.vendor), _params(values))
        row = cursor.fetchone()
    return reported_from(row)


def update_or_create_heartbeat(values: dict[str, Any]) -> Reported:
    """The same through the ORM, for other databases."""
    job_id = values["job_id"]
    failed = values["failure_count"]
    changes = {k: v for k, v in values.items() if k not in ("job_id", "updated_at")}
    for name in ("last_success_at", "last_started_at"):
        if changes[name] is None:
            del changes[name]
    state = changes.pop("state")
    del changes["paused"]
    del changes["failure_count"], changes["consecutive_failures"]
    counted = {
        "run_count": F("run_count") + 1,
        "failure_count": F("failure_count") + failed,
        "consecutive_failures": F("consecutive_failures") + 1 if failed else 0,
    }
    if not Heartbeat.objects.filter(job_id=job_id).update(**changes, **counted):
        try:
            with transaction.atomic():  # the first report creates the row
                Heartbeat.objects.create(
                    job_id=job_id,
                    **changes,
                    run_count=1,
                    failure_count=failed,
                    consecutive_failures=failed,
                    state=state,
                    paused=False,
                )
        except IntegrityError:  # another worker's first report was quicker
            Heartbeat.objects.filter(job_id=job_id).update(**changes, **counted)
    return reported_from(
        Heartbeat.objects.filter(job_id=job_id).values_list(*RETURNED_FIELDS).get()
    )


def reported_from(row: Any) -> Reported:
    pk, state, streak, after, paused, grace_s = row
    return Reported(pk, state, streak, after, bool(paused), grace_s)
