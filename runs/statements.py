"""Hot-path statements in plain SQL: a job's active runs and the insert of
a run (`enqueue_job()`, per run), marking runs published, loading a run with
its job and compare-and-set updates of a run's status (the worker, per run),
and the guarded advance of a batch of triggers (the beat, per batch).

The worker reads a run and its job once per delivery. Through the ORM
(select_related, an EXISTS annotation) that read cost ~1.7 ms on
PostgreSQL here, of which ~1.5 ms was Django building and compiling the
query; this statement costs ~0.25 ms (see benchmarks/README.md). Table and
column names come from the models, so a renamed field breaks loudly here,
not silently. `cas_update` does what ``filter(pk=…, status=…).update(…)``
does, without the ORM's query compiler (0.5 ms of the 1.1 ms it took).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, models

from jobs.models import ConcurrencyGroup, Job, QueueState, Trigger
from jobs.policies import TriggerKind
from jobs.specs import RUN_ANCHORS
from runs.models import Run, RunStatus
from scheduler_project.connections import statement_cursor

JOB_FIELDS = (
    "name",
    "description",
    "kind",
    "target",
    "args",  # a Celery task target's positional arguments
    "timeout_s",
    "timeout_action",
    "heartbeat_deadline_s",
    "overlap_policy",
    "max_instances",
    "max_buffered",
    "max_retries",
    "pause_after_failures",
    "max_runs",
    "consecutive_failures",
    "runs_done",
    "notify",
    "concurrency_group_id",
    "exclusive",
    "result_variable_id",
    "condition_variable_id",
    "condition_values",
    "condition_consume",
    "stop_on_child_failure",
    "parent_id",
    # A command job's (F-02): a callable's are their defaults, cheap to carry.
    "command",
    "shell",
    "cwd",
    "env",
    "nice",
    "success_codes",
    "detached",
    "result_code_at",
)
# Computed with the job (see _extras): its group's limit, whether it has
# children (a parent, F-04), whether another job's trigger waits for its
# runs' ends (F-33).
JOB_EXTRAS = ("group_limit", "has_children", "has_dependents")
RUN_FIELDS = (
    "status",
    "trigger",
    "params",
    "priority",
    "scheduled_for",
    "started_at",
    "job_id",
    "attempt",
    "cause_id",
    "source_trigger_id",  # the trigger a run-anchored interval waits on (runs/anchored.py)
)
_JOB_ID_AT = RUN_FIELDS.index("job_id")


def _col(model: type[Any], name: str) -> str:
    return connection.ops.quote_name(model._meta.get_field(name).column)


def _anchored() -> str:
    """Whether run r's job has interval triggers anchored on its runs
    (params: the interval kind and the two anchors)."""
    trig_t = connection.ops.quote_name(Trigger._meta.db_table)
    return (
        f"EXISTS (SELECT 1 FROM {trig_t} t WHERE t.{_col(Trigger, 'job')} = r.{_col(Run, 'job')}"
        f" AND t.{_col(Trigger, 'kind')} = %s AND t.{_col(Trigger, 'interval_anchor')} IN (%s, %s))"
    )


def _extras() -> list[str]:
    """JOB_EXTRAS' expressions, each an indexed lookup."""
    q = connection.ops.quote_name
    group_t, job_t, trig_t = (q(m._meta.db_table) for m in (ConcurrencyGroup, Job, Trigger))
    return [
        f"(SELECT g.{_col(ConcurrencyGroup, 'limit')} FROM {group_t} g"
        f" WHERE g.{_col(ConcurrencyGroup, 'id')} = j.{_col(Job, 'concurrency_group')})",
        f"EXISTS (SELECT 1 FROM {job_t} c WHERE c.{_col(Job, 'parent')} = j.{_col(Job, 'id')})",
        f"EXISTS (SELECT 1 FROM {trig_t} d WHERE d.{_col(Trigger, 'upstream_job')}"
        f" = j.{_col(Job, 'id')} AND d.{_col(Trigger, 'kind')} = '{TriggerKind.DEPENDENCY}')",
    ]


def _run_and_job_columns() -> str:
    columns = [f"r.{_col(Run, f)}" for f in RUN_FIELDS] + [f"j.{_col(Job, f)}" for f in JOB_FIELDS]
    return ", ".join([*columns, *_extras()])


@cache
def _statement(vendor: str) -> str:
    del vendor  # one cached statement per database vendor
    run_t, job_t = (connection.ops.quote_name(m._meta.db_table) for m in (Run, Job))
    return (
        f"SELECT {_run_and_job_columns()}, {_anchored()} FROM {run_t} r"
        f" JOIN {job_t} j ON j.{_col(Job, 'id')} = r.{_col(Run, 'job')}"
        f" WHERE r.{_col(Run, 'id')} = %s"
    )


@cache
def _start_statement(vendor: str) -> str:
    del vendor  # one cached statement per database vendor
    run_t, job_t = (connection.ops.quote_name(m._meta.db_table) for m in (Run, Job))
    return (
        f"UPDATE {run_t} r SET {_col(Run, 'status')} = %s, {_col(Run, 'started_at')} = %s,"
        f" {_col(Run, 'worker')} = %s FROM {job_t} j"
        f" WHERE r.{_col(Run, 'id')} = %s AND r.{_col(Run, 'status')} = %s"
        f" AND j.{_col(Job, 'id')} = r.{_col(Run, 'job')} AND NOT {_anchored()}"
        f" RETURNING {_run_and_job_columns()}"
    )


def start_plain_run(run_id: int, *, worker: str, now: datetime) -> Run | None:
    """On PostgreSQL: queued → running in one statement that also returns
    the run with its job, for a run whose job has no triggers anchored on
    its runs (the run it returns says so, and its admission then moves no
    trigger: runs/starting.admit_start). None when this
    does not apply: another database, an anchored job, or a run that is not
    queued or not there; the caller then takes the general path (load_run,
    then services.start_run), which also says which case it was."""
    if connection.vendor != "postgresql":
        return None
    at = Run._meta.get_field("started_at").get_db_prep_save(now, connection)
    params = [RunStatus.RUNNING, at, worker[:255], run_id, RunStatus.QUEUED]
    with statement_cursor() as cursor:
        cursor.execute(
            _start_statement(connection.vendor), [*params, TriggerKind.INTERVAL, *RUN_ANCHORS]
        )
        row = cursor.fetchone()
    if row is None:
        return None
    run = _build_run(run_id, row)
    run.waits_for_runs = False  # type: ignore[attr-defined]
    return run


def load_run(run_id: int) -> Run | None:
    """The run with its job (only the fields execution needs) and
    `waits_for_runs` (whether the job has triggers anchored on its runs), or
    None if no such run exists. Values pass through the fields'
    from_db_value, as the ORM would do."""
    with statement_cursor() as cursor:
        cursor.execute(_statement(connection.vendor), [TriggerKind.INTERVAL, *RUN_ANCHORS, run_id])
        row = cursor.fetchone()
    if row is None:
        return None
    run = _build_run(run_id, row)
    run.waits_for_runs = bool(row[-1])  # type: ignore[attr-defined]
    return run


def _build_run(run_id: int, row: Any) -> Run:
    """A Run (with only RUN_FIELDS) and its Job (JOB_FIELDS) from a row that
    holds those columns in that order; every other field holds its default,
    as in Run(**fields). The instances are built from positional values
    (Django's fast path, as Model.from_db takes) from a per-process plan."""
    n_run, n_job = len(RUN_FIELDS), len(JOB_FIELDS)
    job = _instance(Job, JOB_FIELDS, row[n_run : n_run + n_job], pk=row[_JOB_ID_AT])
    extras = row[n_run + n_job :][: len(JOB_EXTRAS)]
    for name, value in zip(JOB_EXTRAS, extras, strict=True):
        setattr(job, name, value if name == "group_limit" else bool(value))
    run = _instance(Run, RUN_FIELDS, row[:n_run], pk=run_id)
    run.job = job
    return run


def _instance(model: type[Any], names: tuple[str, ...], values: Any, *, pk: Any) -> Any:
    defaults, fresh, pk_at, slots, convert = _plan(model, names, connection.vendor)
    args = list(defaults)
    for at, field in fresh:
        args[at] = field.get_default()  # a callable default: its own object each time
    args[pk_at] = pk
    for at, value in zip(slots, values, strict=True):
        args[at] = value
    for at, expression, converters in convert:
        value = args[at]
        for converter in converters:
            value = converter(value, expression, connection)
        args[at] = value
    return model(*args)


@cache
def _plan(model: type[Any], names: tuple[str, ...], vendor: str) -> tuple[Any, ...]:
    """For `model` built from columns `names`: every concrete field's
    default in order, the fields whose default is a callable, the primary
    key's position, each name's position, and the from-database converters
    of the names that have any (looked up once per process: building them
    cost more than the query)."""
    del vendor  # cached per database vendor
    fields = model._meta.concrete_fields
    position = {f.attname: i for i, f in enumerate(fields)}
    defaults = tuple(f.get_default() for f in fields)
    fresh = tuple((i, f) for i, f in enumerate(fields) if f.has_default() and callable(f.default))
    named = [model._meta.get_field(name) for name in names]
    slots = tuple(position[field.attname] for field in named)
    convert = []
    for field, at in zip(named, slots, strict=True):
        expression = field.get_col(model._meta.db_table)
        converters = [
            *connection.ops.get_db_converters(expression),
            *field.get_db_converters(connection),
        ]
        if converters:
            convert.append((at, expression, tuple(converters)))
    return defaults, fresh, position[model._meta.pk.attname], slots, tuple(convert)


def cas_update(run_id: int, *, expected_status: str, changes: dict[str, Any]) -> bool:
    """UPDATE the run's `changes` (field name -> value) if its status is
    still `expected_status`; returns whether this call won. Values go
    through each field's get_db_prep_save, as the ORM does."""
    sql, params = _cas_sql(run_id, expected_status, changes)
    with statement_cursor() as cursor:
        cursor.execute(sql, params)
        return bool(cursor.rowcount == 1)


def cas_update_with(
    run_id: int, *, expected_status: str, changes: dict[str, Any], then: str, then_params: list[Any]
) -> Any:
    """`cas_update` and the statement `then` in one (PostgreSQL): the update
    is the CTE `ended` (RETURNING one row when it won), which `then` reads.
    Returns the row `then` returns, None when the compare-and-set lost
    (then `then` wrote nothing, if it reads `ended` as it must)."""
    update, params = _cas_sql(run_id, expected_status, changes)
    with statement_cursor() as cursor:
        cursor.execute(f"WITH ended AS ({update} RETURNING 1) {then}", [*params, *then_params])
        return cursor.fetchone()


def _cas_sql(run_id: int, expected_status: str, changes: dict[str, Any]) -> tuple[str, list[Any]]:
    assignments, params = [], []
    for name, value in changes.items():
        field = Run._meta.get_field(name)
        assignments.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    sql = (
        f"UPDATE {connection.ops.quote_name(Run._meta.db_table)} SET {', '.join(assignments)}"
        f" WHERE {_col(Run, 'id')} = %s AND {_col(Run, 'status')} = %s"
    )
    return sql, [*params, run_id, expected_status]


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
    with statement_cursor() as cursor:
        cursor.executemany(sql, params)
        return int(cursor.rowcount)


@cache
def _activity_statement(vendor: str) -> str:
    del vendor  # one cached statement per database vendor
    queue_t = connection.ops.quote_name(QueueState._meta.db_table)
    return (
        f"SELECT COALESCE(SUM(CASE WHEN {_col(Run, 'status')} = %s THEN 1 ELSE 0 END), 0),"
        f" COALESCE(SUM(CASE WHEN {_col(Run, 'status')} = %s AND {_col(Run, 'scheduled_for')} <= %s"
        f" THEN 1 ELSE 0 END), 0),"
        f" (SELECT {_col(QueueState, 'paused')} FROM {queue_t} WHERE {_col(QueueState, 'id')} = 1),"
        f" (SELECT {_col(QueueState, 'maintenance')} FROM {queue_t}"
        f" WHERE {_col(QueueState, 'id')} = 1)"
        f" FROM {connection.ops.quote_name(Run._meta.db_table)}"
        f" WHERE {_col(Run, 'job')} = %s AND {_col(Run, 'status')} IN (%s, %s)"
    )


def job_activity(job_id: int, *, now: datetime) -> tuple[int, int, bool, bool]:
    """(running runs, queued runs already due, queue paused, maintenance mode
    on) for one job: what the overlap policy and the queue switches look at,
    in one round trip. A run queued for a later `run_at` is not counted."""
    at = Run._meta.get_field("scheduled_for").get_db_prep_save(now, connection)
    running, queued = RunStatus.RUNNING, RunStatus.QUEUED
    with statement_cursor() as cursor:
        cursor.execute(
            _activity_statement(connection.vendor), [running, queued, at, job_id, running, queued]
        )
        row = cursor.fetchone()
    return int(row[0]), int(row[1]), bool(row[2]), bool(row[3])


@cache
def _insert_fields() -> tuple[Any, ...]:
    return tuple(f for f in Run._meta.concrete_fields if not f.primary_key)


@cache
def _plain_types() -> tuple[type | None, ...]:
    """Per insert column, the Python type whose values (and None) the ORM
    would hand to the driver unchanged: integers, text, booleans and
    foreign keys to integer ids. Other columns (dates, JSON, floats) go
    through the field's own conversion."""
    out: list[type | None] = []
    for f in _insert_fields():
        if isinstance(f, models.BooleanField):
            out.append(bool)
        elif isinstance(f, (models.IntegerField, models.ForeignKey)):
            out.append(int)
        elif isinstance(f, (models.CharField, models.TextField)):
            out.append(str)
        else:
            out.append(None)
    return tuple(out)


@cache
def _insert_into(vendor: str) -> str:
    """`INSERT INTO <the run table> (<every column but the id>)`."""
    del vendor  # one cached statement per database vendor
    columns = ", ".join(connection.ops.quote_name(f.column) for f in _insert_fields())
    return f"INSERT INTO {connection.ops.quote_name(Run._meta.db_table)} ({columns})"


@cache
def _row(vendor: str) -> str:
    """One run's placeholders, `(%s, %s, …)`."""
    del vendor  # one cached statement per database vendor
    return f"({', '.join(['%s'] * len(_insert_fields()))})"


def _insert_params(run: Run) -> list[Any]:
    """A new run's values, as the ORM prepares them for an INSERT (without
    its conversion calls where they would change nothing: a quarter of the
    beat's time per run at 10,000 due at once)."""
    params: list[Any] = []
    for f, plain in zip(_insert_fields(), _plain_types(), strict=True):
        value = getattr(run, f.attname)
        if plain is not None and (
            value is None or (isinstance(value, str) if plain is str else type(value) is plain)
        ):
            params.append(value)
        else:
            params.append(f.get_db_prep_save(f.pre_save(run, True), connection))
    return params


def _inserted(run: Run, pk: int) -> None:
    run.pk = pk
    run._state.adding, run._state.db = False, connection.alias


def insert_run(run: Run) -> Run:
    """INSERT a new (unsaved) run in one statement and set its id, as
    ``run.save()`` would, without the ORM's insert compiler (which cost more
    than the round trip to PostgreSQL). Databases that cannot return the new
    id from an INSERT go through the ORM."""
    if not connection.features.can_return_columns_from_insert:
        run.save(force_insert=True)
        return run
    vendor = connection.vendor
    with statement_cursor() as cursor:
        cursor.execute(
            f"{_insert_into(vendor)} VALUES {_row(vendor)} RETURNING {_col(Run, 'id')}",
            _insert_params(run),
        )
        _inserted(run, cursor.fetchone()[0])
    return run


INSERT_ROWS = 500  # runs per INSERT


@cache
def _unnest_sql(vendor: str) -> str:
    """PostgreSQL: `INSERT … SELECT * FROM unnest(<one array per column>)
    RETURNING id`. One parameter per column whatever the number of runs, so
    the statement's text never changes: psycopg does not re-parse thousands
    of placeholders, and the server plans it once per connection."""
    arrays = ", ".join(f"%s::{f.db_type(connection)}[]" for f in _insert_fields())
    return f"{_insert_into(vendor)} SELECT * FROM unnest({arrays}) RETURNING {_col(Run, 'id')}"


def insert_runs(runs: list[Run]) -> list[Run]:
    """INSERT new (unsaved) runs, INSERT_ROWS to a statement, and set their
    ids, as ``Run.objects.bulk_create(runs)`` does, without the ORM's insert
    compiler (most of the beat's time per run at 10,000 due at once). Raises
    IntegrityError as it would (the unique fire-time key). The ids come back
    in the runs' order, from a multi-row VALUES as from unnest's arrays (as
    Django's own bulk_create relies on)."""
    if not connection.features.can_return_rows_from_bulk_insert:
        return Run.objects.bulk_create(runs)
    vendor = connection.vendor
    unnest = vendor == "postgresql"
    for start in range(0, len(runs), INSERT_ROWS):
        chunk = runs[start : start + INSERT_ROWS]
        values = [_insert_params(run) for run in chunk]
        if unnest:
            sql, params = (
                _unnest_sql(vendor),
                [list(column) for column in zip(*values, strict=True)],
            )
        else:
            rows = ", ".join([_row(vendor)] * len(chunk))
            sql = f"{_insert_into(vendor)} VALUES {rows} RETURNING {_col(Run, 'id')}"
            params = [value for row in values for value in row]
        # A multi-row VALUES' text varies with the batch size: not prepared.
        with statement_cursor(prepared=unnest) as cursor:
            cursor.execute(sql, params)
            ids = [r[0] for r in cursor.fetchall()]
        for run, pk in zip(chunk, ids, strict=True):
            _inserted(run, pk)
    return runs


@cache
def _insert_if_idle_sql(vendor: str) -> str:
    if vendor == "postgresql":  # a parameter in a SELECT list has no type of its own
        values = ", ".join(f"CAST(%s AS {f.db_type(connection)})" for f in _insert_fields())
    else:
        values = _row(vendor)[1:-1]
    run_t = connection.ops.quote_name(Run._meta.db_table)
    queue_t = connection.ops.quote_name(QueueState._meta.db_table)
    status, scheduled_for = _col(Run, "status"), _col(Run, "scheduled_for")
    return (
        f"{_insert_into(vendor)} SELECT {values}"
        f" WHERE NOT EXISTS (SELECT 1 FROM {run_t} WHERE {_col(Run, 'job')} = %s"
        f" AND ({status} = %s OR ({status} = %s AND {scheduled_for} <= %s)))"
        f" AND NOT EXISTS (SELECT 1 FROM {queue_t} WHERE {_col(QueueState, 'id')} = 1"
        f" AND ({_col(QueueState, 'paused')} OR {_col(QueueState, 'maintenance')}))"
        f" RETURNING {_col(Run, 'id')}"
    )


def insert_run_if_idle(run: Run, *, now: datetime) -> bool:
    """INSERT a new queued run due now in one statement, if its job has no
    run running and none queued and due, and the queue is neither paused
    nor in maintenance: what `job_activity` and then `insert_run` do for a
    job that is idle, in one round trip instead of two. False (nothing
    written) when any of it does not hold, or the database cannot return
    the new id from an INSERT; the caller then takes that general path."""
    if not connection.features.can_return_columns_from_insert:
        return False
    at = Run._meta.get_field("scheduled_for").get_db_prep_save(now, connection)
    params = [*_insert_params(run), run.job_id, RunStatus.RUNNING, RunStatus.QUEUED, at]
    with statement_cursor() as cursor:
        cursor.execute(_insert_if_idle_sql(connection.vendor), params)
        row = cursor.fetchone()
    if row is None:
        return False
    _inserted(run, row[0])
    return True


def mark_published(run_ids: list[int], *, now: datetime, again: bool = False) -> None:
    """Record that these runs' messages went to the broker (the outbox):
    published_at = `now` where it was empty, or on every one with `again`
    (a lost message sent again, runs/delivery.py)."""
    at = Run._meta.get_field("published_at").get_db_prep_save(now, connection)
    only_new = "" if again else f" AND {_col(Run, 'published_at')} IS NULL"
    sql = (
        f"UPDATE {connection.ops.quote_name(Run._meta.db_table)} SET {_col(Run, 'published_at')} = %s"
        f" WHERE {_col(Run, 'id')} IN ({', '.join(['%s'] * len(run_ids))}){only_new}"
    )
    with statement_cursor(prepared=len(run_ids) == 1) as cursor:
        cursor.execute(sql, [at, *run_ids])
