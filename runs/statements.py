"""Hot-path statements in plain SQL: loading a run with its job and
compare-and-set updates of a run's status (the worker, per run), and the
guarded advance of a batch of triggers (the beat, per batch).

The worker reads a run and its job once per delivery. Through the ORM
(select_related, an EXISTS annotation) that read cost ~1.7 ms on
PostgreSQL here, of which ~1.5 ms was Django building and compiling the
query; this statement costs ~0.25 ms (see benchmarks/README.md). Table and
column names come from the models, so a renamed field breaks loudly here,
not silently. `cas_update` does what ``filter(pk=…, status=…).update(…)``
does, without the ORM's query compiler (0.5 ms of the 1.1 ms it took).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.db import connection

from jobs.models import Job, Trigger
from jobs.policies import TriggerKind
from jobs.services import RUN_ANCHORS

from .models import Run

JOB_FIELDS = ("name", "description", "kind", "target", "timeout_s", "heartbeat_deadline_s")
RUN_FIELDS = ("status", "trigger", "params", "priority", "scheduled_for", "started_at", "job_id")


def _col(model: type[Any], name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


@cache
def _statement(vendor: str) -> str:
    del vendor  # one cached statement per database vendor
    run_t, job_t, trig_t = (
        connection.ops.quote_name(m._meta.db_table) for m in (Run, Job, Trigger)
    )
    waits = (
        f"EXISTS (SELECT 1 FROM {trig_t} t WHERE t.{_col(Trigger, 'job')} = r.{_col(Run, 'job')}"
        f" AND t.{_col(Trigger, 'kind')} = %s AND t.{_col(Trigger, 'interval_anchor')} IN (%s, %s))"
    )
    columns = [f"r.{_col(Run, f)}" for f in RUN_FIELDS] + [f"j.{_col(Job, f)}" for f in JOB_FIELDS]
    return (
        f"SELECT {', '.join(columns)}, {waits} FROM {run_t} r"
        f" JOIN {job_t} j ON j.{_col(Job, 'id')} = r.{_col(Run, 'job')}"
        f" WHERE r.{_col(Run, 'id')} = %s"
    )


def load_run(run_id: int) -> Run | None:
    """The run with its job (only the fields execution needs) and
    `waits_for_runs` (whether the job has triggers anchored on its runs), or
    None if no such run exists. Values pass through the fields'
    from_db_value, as the ORM would do."""
    with connection.cursor() as cursor:
        cursor.execute(_statement(connection.vendor), [TriggerKind.INTERVAL, *RUN_ANCHORS, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    values = [_from_db(Run, f, v) for f, v in zip(RUN_FIELDS, row, strict=False)]
    job_values = [
        _from_db(Job, f, v) for f, v in zip(JOB_FIELDS, row[len(RUN_FIELDS) :], strict=False)
    ]
    run_kwargs = dict(zip(RUN_FIELDS, values, strict=True))
    job = Job(pk=run_kwargs["job_id"], **dict(zip(JOB_FIELDS, job_values, strict=True)))
    run = Run(pk=run_id, **run_kwargs)
    run.job = job
    run.waits_for_runs = bool(row[-1])  # type: ignore[attr-defined]
    return run


def _from_db(model: type[Any], name: str, value: Any) -> Any:
    field = model._meta.get_field(name)
    converters = connection.ops.get_db_converters(field.get_col(model._meta.db_table)) + (
        field.get_db_converters(connection)
    )
    for converter in converters:
        value = converter(value, field.get_col(model._meta.db_table), connection)
    return value


def cas_update(run_id: int, *, expected_status: str, changes: dict[str, Any]) -> bool:
    """UPDATE the run's `changes` (field name -> value) if its status is
    still `expected_status`; returns whether this call won. Values go
    through each field's get_db_prep_save, as the ORM does."""
    assignments, params = [], []
    for name, value in changes.items():
        field = Run._meta.get_field(name)
        assignments.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"UPDATE {connection.ops.quote_name(Run._meta.db_table)} SET {', '.join(assignments)}"
        f" WHERE {_col(Run, 'id')} = %s AND {_col(Run, 'status')} = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, run_id, expected_status])
        return bool(cursor.rowcount == 1)


def advance_triggers(rows: list[tuple[int, Any, Any, int, Any]]) -> int:
    """For each (trigger id, old next_run_at, new next_run_at, missed_count,
    last_fired_at): set the new values where next_run_at still equals the
    old one. One executemany (pipelined by psycopg); returns how many rows
    moved. Through the ORM (a CASE per column, an OR per row) this cost more
    than the rest of the claim together."""
    prep = Trigger._meta.get_field("next_run_at").get_db_prep_save
    sql = (
        f"UPDATE {connection.ops.quote_name(Trigger._meta.db_table)}"
        f" SET {_col(Trigger, 'next_run_at')} = %s, {_col(Trigger, 'missed_count')} = %s,"
        f" {_col(Trigger, 'last_fired_at')} = %s"
        f" WHERE {_col(Trigger, 'id')} = %s AND {_col(Trigger, 'next_run_at')} = %s"
    )
    params = [
        (prep(new, connection), missed, prep(fired, connection), pk, prep(old, connection))
        for pk, old, new, missed, fired in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)
        return int(cursor.rowcount)
