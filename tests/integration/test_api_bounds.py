"""Bounds of the REST API (issue 25, "bounds everywhere"): every list's page
size is capped by TAKT_API_MAX_PAGE_SIZE, and a larger `limit` (or one
that is not a whole number, or a bad `offset`) is refused naming the
parameter, for a user and for a job-scoped token alike."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from runs.services import enqueue_job
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

LISTS = ["jobs", "runs", "heartbeats", "alerts", "groups", "variables"]


@pytest.fixture(autouse=True)
def _redis(redis_client: Any) -> None:
    """Runs are published to the private Redis after commit."""


@pytest.fixture
def admin() -> SessionClient:
    return SessionClient(user_with(username="root", superuser=True))


@pytest.mark.parametrize("name", LISTS)
@override_settings(TAKT_API_MAX_PAGE_SIZE=3)
def test_a_page_larger_than_the_cap_is_refused_naming_limit(admin: SessionClient, name: str):
    path = f"/api/v1/{name}"
    assert admin.get(path, limit=3).status_code == 200  # at the cap
    refused = admin.get(path, limit=4)  # one past it
    assert refused.status_code == 400, refused.content
    assert refused.json() == {"limit": ["must be a whole number from 1 to 3, got '4'"]}
    assert admin.get(path, limit=1_000_000_000).json().keys() == {"limit"}


def test_the_default_cap_refuses_the_billion_row_page(admin: SessionClient):
    """The issue's request: `?limit=1000000000` read every run."""
    job = make_job("export")
    for _ in range(3):
        enqueue_job(job)
    refused = admin.get("/api/v1/runs", limit=1_000_000_000)
    assert refused.status_code == 400
    assert refused.json() == {"limit": ["must be a whole number from 1 to 1000, got '1000000000'"]}
    page = admin.get("/api/v1/runs", limit=1000).json()
    assert len(page["results"]) == 3
    assert len(admin.get("/api/v1/runs").json()["results"]) == 3  # no limit: the default page


def test_a_job_token_is_held_to_the_same_cap():
    job = make_job("export", api_trigger_permission="token")
    enqueue_job(job)
    client = TokenClient(make_token(job=job))
    assert client.get("/api/v1/runs", job=job.pk).status_code == 200
    refused = client.get("/api/v1/runs", job=job.pk, limit=1_000_000_000)
    assert refused.status_code == 400 and list(refused.json()) == ["limit"]


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"limit": "0"}, "limit", "must be a whole number from 1 to 1000, got '0'"),
        ({"limit": "-5"}, "limit", "must be a whole number from 1 to 1000, got '-5'"),
        ({"limit": "ten"}, "limit", "must be a whole number from 1 to 1000, got 'ten'"),
        ({"limit": "2.5"}, "limit", "must be a whole number from 1 to 1000, got '2.5'"),
        ({"offset": "-1"}, "offset", "must be a whole number from 0, got '-1'"),
        ({"offset": "first"}, "offset", "must be a whole number from 0, got 'first'"),
    ],
)
def test_a_limit_or_offset_that_is_no_whole_number_is_refused(admin, params, field, message):
    refused = admin.get("/api/v1/jobs", **params)
    assert refused.status_code == 400
    assert refused.json() == {field: [message]}


def test_the_schema_states_the_cap(admin: SessionClient):
    schema = admin.get("/api/v1/schema", format="json").json()
    parameters = schema["paths"]["/api/v1/runs/"]["get"]["parameters"]
    limit = next(p for p in parameters if p["name"] == "limit")
    assert limit["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert "at most 1000" in limit["description"]
