"""The served OpenAPI schema against the API itself (F-41).

schemathesis reads /api/v1/schema and, for every operation in it, sends
generated requests (valid and invalid) in process to the WSGI app, as a
superuser with an API token. No answer may be a server error (5xx), and
every answer must have a status the schema lists for the operation and
match the schema's body for it (jobs.api.schema adds the refusals). Bounded and repeatable: derandomized, few examples, no
example database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)

from jobs.models import Job
from scheduler_project.wsgi import application
from tests.integration.api_helpers import make_token, user_with


@pytest.fixture
def in_process_requests(db) -> Iterator[None]:
    """Keep the test's database connection open across requests, as
    Django's test client does: the end of a request would close it."""
    signals = (request_started, request_finished)
    for signal in signals:
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in signals:
            signal.connect(close_old_connections)


@pytest.fixture
def auth(in_process_requests) -> dict[str, str]:
    admin = user_with(username="admin", superuser=True)
    return {"Authorization": f"Bearer {make_token(user=admin)}"}


# Loaded once, at collection: serving the schema reads no database. (The
# fixture-based loader, schemathesis.pytest.from_fixture, fails on pytest 9.)
schema = schemathesis.openapi.from_wsgi("/api/v1/schema", application)


@schema.parametrize()
# One test for every operation of the schema (about 60 s on an idle 2-core
# machine, more under load, and more with each new operation): its own
# bound, not the suite's per-test minute.
@pytest.mark.timeout(300)
@settings(
    max_examples=5,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_api_keeps_to_its_schema(case, auth):
    case.call_and_validate(
        headers=auth,
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance],
    )


def test_a_job_without_schedule_keeps_to_the_schema(auth):
    """next_run_at is null for a job without an active trigger."""
    Job.objects.create(name="unscheduled", target="tests.echo")
    case = schema["/api/v1/jobs/"]["GET"].Case()
    case.call_and_validate(headers=auth, checks=[response_schema_conformance])


def test_coordination_keeps_to_the_schema(auth, redis_client):
    """A parent named by key or id, a dependency, a group with a slot taken
    (holders from Redis), a variable with its jobs, a run with its cause."""
    from jobs.models import ConcurrencyGroup, ResultVariable, Trigger
    from runs.core.start import SlotNeeds
    from runs.models import Run
    from runs.slots import acquire_start

    group = ConcurrencyGroup.objects.create(name="Imports")
    variable = ResultVariable.objects.create(name="etl_result")
    keyed = Job.objects.create(name="ETL", key="etl", target="tests.echo", result_variable=variable)
    plain = Job.objects.create(name="Plain", target="tests.echo")
    child = Job.objects.create(
        name="Load", target="tests.echo", parent=keyed, concurrency_group=group
    )
    Job.objects.create(name="Extract", target="tests.echo", parent=plain)
    report = Job.objects.create(
        name="Report", target="tests.echo", condition_variable=variable, condition_values=[0]
    )
    Trigger.objects.create(job=report, kind="dependency", upstream_job=plain)
    at = keyed.created_at
    parent_run = Run.objects.create(job=keyed, trigger="manual", scheduled_for=at, enqueued_at=at)
    run = Run.objects.create(
        job=child, trigger="parent", cause=parent_run, scheduled_for=at, enqueued_at=at
    )
    acquire_start(child.pk, run_id=run.pk, needs=SlotNeeds(group=group.pk))
    for path in ("/api/v1/jobs/", "/api/v1/groups/", "/api/v1/variables/", "/api/v1/runs/"):
        response = (
            schema[path]["GET"]
            .Case()
            .call_and_validate(headers=auth, checks=[response_schema_conformance])
        )
        assert response.status_code == 200
    assert response.json()["results"][0]["cause"] == parent_run.pk


@pytest.mark.parametrize("field", ["finished_after", "enqueued_before", "scheduled_after"])
def test_far_utc_offsets_in_run_filters_are_no_server_error(auth, field):
    """PostgreSQL refuses offsets beyond ±15:59: the filters compare in UTC."""
    case = schema["/api/v1/runs/"]["GET"].Case(query={field: "0804-04-08T15:24:11+23:13"})
    response = case.call_and_validate(headers=auth, checks=[not_a_server_error])
    assert response.status_code == 200
