"""A run's end and its heartbeat (F-50, F-60) as a worker records them
outside any transaction: on PostgreSQL in one statement (the heartbeat's
upsert reads the end's compare-and-set), elsewhere one after the other.
Either way the heartbeat follows every recorded end, an end that lost its
compare-and-set writes no heartbeat, and a heartbeat statement that fails
never costs the end."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from heartbeats.models import Heartbeat
from runs import signals
from runs.ending import finish_run
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, start_run
from runs.signals import EndCompanion
from tests.integration.conftest import SECOND, clock, make_job, utc

# Outside a test transaction, as on a worker: the end is not in an atomic block.
pytestmark = pytest.mark.django_db(transaction=True)

T0 = utc(2026, 6, 1, 8, 0)


def test_each_recorded_end_writes_the_heartbeat_with_it(redis_client):
    job = make_job("echo")
    first = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    with CaptureQueriesContext(connection) as captured:
        assert execute(first.pk, worker="w", clock=clock(T0, T0 + SECOND)) == RunStatus.SUCCEEDED
    failing = make_job(target="tests.fail", params={"message": "disk full"})
    second = create_run(failing, trigger=RunTrigger.MANUAL, now=T0)
    execute(second.pk, worker="w", clock=clock(T0, T0 + 2 * SECOND))
    again = create_run(job, trigger=RunTrigger.MANUAL, now=T0 + 5 * SECOND)
    execute(again.pk, worker="w", clock=clock(T0 + 5 * SECOND, T0 + 6 * SECOND))

    beat = Heartbeat.objects.get(job=job)
    assert (beat.last_run_id, beat.run_count, beat.failure_count) == (again.pk, 2, 0)
    assert (beat.last_status, beat.last_run_at) == (RunStatus.SUCCEEDED, T0 + 6 * SECOND)
    bad = Heartbeat.objects.get(job=failing)
    assert (bad.last_status, bad.failure_count, bad.consecutive_failures) == ("failed", 1, 1)
    assert bad.last_result == "disk full"
    ends = [q["sql"] for q in captured.captured_queries if "finished_at" in q["sql"]]
    if connection.vendor == "postgresql":  # one statement for the end and the heartbeat
        assert len(ends) == 1 and ends[0].startswith("WITH ended AS (UPDATE")
        writes = [q["sql"] for q in captured.captured_queries if _writes_heartbeat(q["sql"])]
        assert writes == ends
        assert _prepared() > 0  # planned once per connection
    else:
        assert any(_writes_heartbeat(q["sql"]) for q in captured.captured_queries)


def _writes_heartbeat(sql: str) -> bool:
    table = connection.ops.quote_name(Heartbeat._meta.db_table)
    return f"INSERT INTO {table}" in sql or f"UPDATE {table}" in sql


def test_an_end_that_lost_its_compare_and_set_writes_no_heartbeat(redis_client):
    job = make_job("echo")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    assert start_run(run, worker="w", now=T0)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELLED)  # cancelled meanwhile

    assert not finish_run(run, status=RunStatus.SUCCEEDED, now=T0 + SECOND)

    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED
    assert not Heartbeat.objects.filter(job=job).exists()


@pytest.fixture
def broken_companion() -> Iterator[None]:
    """The statement going with the end fails (division by zero)."""

    def broken(run: Run, fields: dict) -> EndCompanion:
        return EndCompanion("SELECT 1 / 0 FROM ended", [], lambda row: row)

    saved = list(signals.end_companion)
    signals.end_companion[:] = [broken]
    yield
    signals.end_companion[:] = saved


def test_a_failing_heartbeat_statement_never_costs_the_end(redis_client, broken_companion, caplog):
    job = make_job("echo")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    assert execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND)) == RunStatus.SUCCEEDED

    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    # The heartbeat came from the run_finished receiver instead.
    assert Heartbeat.objects.get(job=job).last_run_id == run.pk
    if connection.vendor == "postgresql":
        assert "recording the end alone" in caplog.text


def test_without_prepared_statements_runs_are_recorded_alike(redis_client, settings):
    """TAKT_DB_PREPARED_STATEMENTS=false, for a pooler that keeps no
    prepared statements (PgBouncer in transaction mode before 1.21)."""
    settings.TAKT_DB_PREPARED_STATEMENTS = False
    connection.close()  # a fresh connection: none prepared yet
    job = make_job("echo")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)

    assert execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND)) == RunStatus.SUCCEEDED

    assert Heartbeat.objects.get(job=job).last_run_id == run.pk
    if connection.vendor == "postgresql":
        assert _prepared() == 0


def _prepared() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return int(cursor.fetchone()[0])


def test_a_migration_elsewhere_does_not_break_the_prepared_statements(redis_client):
    """Another process changes a column the worker's prepared statements
    return (as an upgrade's migration may, with workers running): the next
    run on the same connection is recorded all the same."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's (SQLite: nothing to test)")
    job = make_job("echo")
    first = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    assert execute(first.pk, worker="w", clock=clock(T0, T0 + SECOND)) == RunStatus.SUCCEEDED
    table = Run._meta.db_table
    other = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        other.execute(f'ALTER TABLE "{table}" ALTER COLUMN "trigger" TYPE text')
        second = create_run(job, trigger=RunTrigger.MANUAL, now=T0 + 5 * SECOND)
        done = execute(second.pk, worker="w", clock=clock(T0 + 5 * SECOND, T0 + 6 * SECOND))
        assert done == RunStatus.SUCCEEDED
        assert Run.objects.get(pk=second.pk).worker == "w"
    finally:
        other.execute(f'ALTER TABLE "{table}" ALTER COLUMN "trigger" TYPE varchar(16)')
        other.close()
