"""Bounds of the REST API and of params (issue 25, "bounds everywhere"):
every list's page size is capped by TAKT_API_MAX_PAGE_SIZE, and a larger
`limit` (or one that is not a whole number, or a bad `offset`) is refused
naming the parameter, for a user and for a job-scoped token alike; params
(a job's, a run's) and a Celery task job's args take at most
TAKT_MAX_PARAMS_BYTES as JSON, in the model, enqueue_job and the API."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from jobs.errors import InvalidInput
from jobs.models import Job
from runs.models import Run
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


# --- params: at most TAKT_MAX_PARAMS_BYTES as compact JSON -------------------------

CAP = 1024  # the smallest TAKT_MAX_PARAMS_BYTES


def params_of(size: int) -> dict[str, str]:
    """Params that take exactly `size` bytes as compact JSON: {"x":"aaa…"}."""
    return {"x": "a" * (size - len('{"x":""}'))}


def too_big(size: int) -> str:
    return f"at most {CAP} bytes as JSON (TAKT_MAX_PARAMS_BYTES), got {size}"


@override_settings(TAKT_MAX_PARAMS_BYTES=CAP)
def test_a_job_keeps_params_up_to_the_cap_and_refuses_one_byte_more():
    job = make_job("export", params=params_of(CAP))
    job.full_clean()  # at the cap
    job.params = params_of(CAP + 1)
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert refused.value.message_dict == {"params": [too_big(CAP + 1)]}


@override_settings(TAKT_MAX_PARAMS_BYTES=CAP)
def test_a_celery_task_jobs_args_have_the_same_cap():
    job = make_job("beat task", target="tests.celery_echo", args=["a" * (CAP - 4)])
    job.full_clean()  # ["aaa…"]: the cap
    job.args = ["a" * (CAP - 3)]
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert refused.value.message_dict == {"args": [too_big(CAP + 1)]}


@override_settings(TAKT_MAX_PARAMS_BYTES=CAP)
def test_enqueue_job_refuses_run_params_past_the_cap_and_makes_no_run():
    job = make_job("export", params={"region": "eu"})
    assert enqueue_job(job, params=params_of(CAP - len(',"region":"eu"'))).params["region"] == "eu"
    with pytest.raises(InvalidInput) as refused:
        enqueue_job(job, params=params_of(CAP))  # merged over the job's: past the cap
    assert refused.value.field == "params"
    assert refused.value.message == too_big(CAP + len(',"region":"eu"'))
    assert Run.objects.count() == 1


@override_settings(TAKT_MAX_PARAMS_BYTES=CAP)
def test_the_api_refuses_run_params_past_the_cap_naming_params():
    """The issue's 20 runs of 2.4 MB each by one token."""
    job = make_job("export", api_trigger_permission="token", caller_params=["*"])
    client = TokenClient(make_token(job=job))
    refused = client.send("post", f"/api/v1/jobs/{job.pk}/run", {"params": params_of(CAP + 1)})
    assert refused.status_code == 400
    assert refused.json() == {"params": [too_big(CAP + 1)]}
    assert not Run.objects.exists()
    ok = client.send("post", f"/api/v1/jobs/{job.pk}/run", {"params": params_of(CAP)})
    assert ok.status_code == 201, ok.json()


@override_settings(TAKT_MAX_PARAMS_BYTES=CAP)
def test_the_api_refuses_a_job_with_params_past_the_cap_and_changes_nothing(admin):
    body = {"name": "big", "target": "tests.echo", "params": params_of(CAP + 1)}
    refused = admin.send("post", "/api/v1/jobs", body)
    assert refused.status_code == 400
    assert refused.json() == {"params": [too_big(CAP + 1)]}
    assert not Job.objects.filter(name="big").exists()

    job = make_job("export", params={"region": "eu"})
    refused = admin.send("patch", f"/api/v1/jobs/{job.pk}", {"params": params_of(CAP + 1)})
    assert refused.status_code == 400 and list(refused.json()) == ["params"]
    job.refresh_from_db()
    assert job.params == {"region": "eu"}
