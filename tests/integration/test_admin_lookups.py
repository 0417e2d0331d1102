"""Regular expressions in admin URLs (issue 25, "bounds everywhere"):
`?name__regex=…` ran the pattern in the database (Python's `re` on SQLite:
a catastrophic pattern held the request), and a bad pattern answered 503
"database unavailable". Every Takt admin refuses regex lookups (400), and
only an error of the connection itself is answered with that 503."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, transaction
from django.test import RequestFactory

from jobs.models import Job
from scheduler_project.middleware import DatabaseUnavailableMiddleware
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

CHANGELISTS = [
    "/admin/takt_jobs/job/",
    "/admin/takt_jobs/holidaycalendar/",
    "/admin/takt_jobs/concurrencygroup/",
    "/admin/takt_jobs/resultvariable/",
    "/admin/takt_jobs/apitoken/",
    "/admin/takt_runs/run/",
    "/admin/takt_runs/auditrecord/",
    "/admin/takt_heartbeats/heartbeat/",
    "/admin/takt_heartbeats/alert/",
]
FIELD = {  # a text field of each model
    "/admin/takt_runs/run/": "message",
    "/admin/takt_runs/auditrecord/": "action",
    "/admin/takt_heartbeats/alert/": "title",
}


@pytest.mark.parametrize("path", CHANGELISTS)
@pytest.mark.parametrize("lookup", ["regex", "iregex"])
def test_a_regex_lookup_in_an_admin_url_is_refused(admin_client, path, lookup):
    field = FIELD.get(path, "name")
    assert admin_client.get(path, {f"{field}__icontains": "a"}).status_code == 200
    refused = admin_client.get(path, {f"{field}__{lookup}": "^(a+)+$"})
    assert refused.status_code == 400


def test_a_regex_lookup_through_a_relation_is_refused(admin_client):
    assert admin_client.get("/admin/takt_runs/run/", {"job__name__regex": "^a"}).status_code == 400


def test_a_statement_the_database_refuses_is_no_outage(rf: RequestFactory):
    """A bad regular expression (SQLite: OperationalError from Python's re;
    PostgreSQL: DataError) is the request's error, answered as one (500),
    not 503 "database unavailable"."""
    make_job("export")
    # In a savepoint: on PostgreSQL the refused statement aborts its transaction.
    with pytest.raises(DatabaseError) as raised, transaction.atomic():
        Job.objects.filter(name__regex="(").exists()
    middleware = DatabaseUnavailableMiddleware(lambda request: None)  # type: ignore[arg-type,return-value]
    assert middleware.process_exception(rf.get("/admin/takt_jobs/job/"), raised.value) is None
    assert Job.objects.filter(name="export").exists()  # the connection still works
