"""The jobs API (F-41): every endpoint with the admin's session + CSRF and
with an API token; refusals; PATCH's bad values named by field with
nothing stored changed; the same rules as the admin."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from jobs.models import HolidayCalendar, Job, Trigger
from tests.integration.api_helpers import (
    SessionClient,
    TokenClient,
    make_token,
    user_with,
)
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

JOB_PERMS = (
    "takt_jobs.view_job",
    "takt_jobs.add_job",
    "takt_jobs.change_job",
    "takt_jobs.delete_job",
)


def snapshot(job: Job) -> dict[str, Any]:
    """Everything stored about a job and its triggers."""
    job = Job.objects.get(pk=job.pk)
    fields = {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}
    triggers = [
        {f.attname: getattr(t, f.attname) for f in Trigger._meta.concrete_fields}
        for t in Trigger.objects.filter(job=job).order_by("pk")
    ]
    return {"job": fields, "triggers": triggers}


@pytest.fixture(params=["session", "token"])
def client(request: pytest.FixtureRequest) -> Any:
    user = user_with(*JOB_PERMS)
    if request.param == "session":
        return SessionClient(user)
    return TokenClient(make_token(user=user))


def write(client: Any, method: str, path: str, body: Any = None) -> Any:
    return client.send(method, path, body)


@pytest.fixture
def cron_job() -> Job:
    job = make_job("nightly report", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *", timezone="UTC")
    return job


# --- every endpoint, with the session and with a token ----------------------------


def test_list_and_filter(client: Any, cron_job: Job) -> None:
    make_job("other", enabled=False)
    response = client.get("/api/v1/jobs")
    assert response.status_code == 200
    names = [job["name"] for job in response.json()["results"]]
    assert {"nightly report", "other"} <= set(names)
    disabled = client.get("/api/v1/jobs", enabled="false").json()["results"]
    assert "other" in [job["name"] for job in disabled]
    assert all(job["enabled"] is False for job in disabled)
    found = client.get("/api/v1/jobs", name="NIGHTLY").json()["results"]
    assert [job["id"] for job in found] == [cron_job.pk]


def test_retrieve_shows_triggers_in_words_and_next_run(client: Any, cron_job: Job) -> None:
    data = client.get(f"/api/v1/jobs/{cron_job.pk}").json()
    assert data["name"] == "nightly report"
    [trigger] = data["triggers"]
    assert trigger["cron_expression"] == "0 3 * * *"
    assert trigger["description"]
    assert data["next_run_at"] is not None
    assert data["interval_minutes"] is None


def test_create_with_triggers(client: Any) -> None:
    HolidayCalendar.objects.create(name="Office days off", extra_dates="2030-01-02")
    body = {
        "name": "sync",
        "key": "sync",
        "target": "tests.echo",
        "params": {"region": "eu"},
        "priority": 3,
        "overlap_policy": "buffer_one",
        "triggers": [
            {"kind": "cron", "cron_expression": "*/15 * * * *", "timezone": "europe/vienna"},
            {"kind": "interval", "interval_seconds": 600, "exclude_calendars": ["Office days off"]},
        ],
    }
    response = write(client, "post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.key, job.priority, job.params, job.overlap_policy) == (
        "sync",
        3,
        {"region": "eu"},
        "buffer_one",
    )
    cron, interval = job.triggers.order_by("pk")
    assert cron.timezone == "Europe/Vienna"  # stored in canonical spelling, as in the admin
    assert cron.next_run_at is not None and cron.active
    assert [c.name for c in interval.exclude_calendars.all()] == ["Office days off"]


def test_patch_interval_minutes_sets_and_removes_the_schedule(client: Any, cron_job: Job) -> None:
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"interval_minutes": 60})
    assert response.status_code == 200, response.json()
    assert response.json()["interval_minutes"] == 60
    [trigger] = Trigger.objects.filter(job=cron_job)
    assert (trigger.kind, trigger.interval_seconds, trigger.active) == ("interval", 3600, True)
    # A second PATCH keeps the same trigger and changes its interval.
    write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"interval_minutes": 43200})
    assert Trigger.objects.get(job=cron_job).pk == trigger.pk
    assert Trigger.objects.get(job=cron_job).interval_seconds == 43200 * 60
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"interval_minutes": None})
    assert response.status_code == 200
    assert response.json()["triggers"] == [] and response.json()["interval_minutes"] is None
    assert not Trigger.objects.filter(job=cron_job).exists()


def test_patch_enabled_false(client: Any, cron_job: Job) -> None:
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False})
    assert response.status_code == 200
    assert response.json()["enabled"] is False
    assert not Trigger.objects.get(job=cron_job).active  # the beat no longer sees it
    write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": True})
    assert Trigger.objects.get(job=cron_job).active


def test_delete(client: Any, cron_job: Job) -> None:
    response = write(client, "delete", f"/api/v1/jobs/{cron_job.pk}")
    assert response.status_code == 204
    assert not Job.objects.filter(pk=cron_job.pk).exists()


def test_pause_and_resume(client: Any, cron_job: Job) -> None:
    response = write(
        client, "post", f"/api/v1/jobs/{cron_job.pk}/pause", {"note": "database migration"}
    )
    assert response.status_code == 200, response.json()
    job = Job.objects.get(pk=cron_job.pk)
    assert job.paused and job.pause_note == "database migration"
    assert job.paused_by == "operator (API)"
    assert not Trigger.objects.get(job=cron_job).active
    response = write(client, "post", f"/api/v1/jobs/{cron_job.pk}/resume")
    assert response.status_code == 200 and response.json()["paused"] is False
    assert Trigger.objects.get(job=cron_job).active


def test_unknown_job_is_404(client: Any) -> None:
    assert client.get("/api/v1/jobs/999999").status_code == 404
    assert write(client, "patch", "/api/v1/jobs/999999", {"enabled": False}).status_code == 404


@pytest.fixture(params=["session", "token"])
def task_client(request: pytest.FixtureRequest) -> Any:
    """A client whose user may name Celery tasks (jobs.capabilities)."""
    user = user_with(*JOB_PERMS, "takt_jobs.run_celery_tasks", username="tasks")
    return SessionClient(user) if request.param == "session" else TokenClient(make_token(user=user))


def test_a_celery_task_job_takes_positional_args(task_client: Any) -> None:
    client = task_client
    body = {"name": "beat task", "target": "tests.celery_echo", "args": [1, "x"]}
    response = write(client, "post", "/api/v1/jobs", body)
    assert response.status_code == 201, response.json()
    assert response.json()["args"] == [1, "x"]
    job = Job.objects.get(pk=response.json()["id"])
    assert job.args == [1, "x"]
    assert client.get(f"/api/v1/jobs/{job.pk}").json()["args"] == [1, "x"]


def test_args_for_a_takt_job_target_are_refused_naming_the_field(client: Any) -> None:
    body = {"name": "report", "target": "tests.echo", "args": [1, "x"]}
    response = write(client, "post", "/api/v1/jobs", body)
    assert response.status_code == 400
    assert response.json() == {
        "args": [
            "only a Celery task target takes positional arguments: 'tests.echo' is registered"
            " with @takt_job and gets the run's context (give it params)"
        ]
    }
    assert not Job.objects.filter(name="report").exists()


# --- bad input: named field, nothing stored changes ---------------------------------

BAD_PATCHES = [
    ({"interval_minutes": 0}, "interval_minutes"),
    ({"interval_minutes": 43201}, "interval_minutes"),
    ({"interval_minutes": -60}, "interval_minutes"),
    ({"interval_minutes": "hourly"}, "interval_minutes"),
    ({"interval_minutes": 1.5}, "interval_minutes"),
    ({"interval_minutes": [60]}, "interval_minutes"),
    ({"interval_minutes": 60, "triggers": []}, "interval_minutes"),
    ({"enabled": "maybe"}, "enabled"),
    ({"enabled": None}, "enabled"),
    ({"priority": 10}, "priority"),
    ({"name": ""}, "name"),
    ({"target": "no.such.callable"}, "target"),
    ({"params": [1, 2]}, "params"),
    ({"args": [1, "x"]}, "args"),  # tests.echo is an @takt_job function, not a Celery task
    ({"args": {"k": 2}}, "args"),
    ({"overlap_policy": "sometimes"}, "overlap_policy"),
    ({"retry_backoff_s": 60, "retry_backoff_max_s": 10}, "retry_backoff_max_s"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"key": "has spaces"}, "key"),
    ({"notify": {"on": ["lunch"]}}, "notify"),
]


@pytest.mark.parametrize(("body", "field"), BAD_PATCHES, ids=[str(b) for b, _ in BAD_PATCHES])
def test_bad_patch_names_the_field_and_changes_nothing(
    client: Any, cron_job: Job, body: dict[str, Any], field: str
) -> None:
    before = snapshot(cron_job)
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", body)
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert snapshot(cron_job) == before


BAD_TRIGGERS = [
    ({"kind": "cron", "cron_expression": "61 * * * *"}, "cron_expression"),
    ({"kind": "cron", "cron_expression": "0 3 * * *", "timezone": "Mars/Olympus"}, "timezone"),
    ({"kind": "interval", "interval_seconds": 0}, "interval_seconds"),
    ({"kind": "interval"}, "interval_seconds"),
    ({"kind": "weekly"}, "kind"),
    ({"kind": "once", "run_at": "2000-01-01T00:00:00Z"}, "run_at"),
    (
        {
            "kind": "calendar",
            "calendar_rule": "date",
            "month": 2,
            "day_of_month": 31,
            "at_time": "08:00",
        },
        "day_of_month",
    ),
    ({"kind": "cron", "cron_expression": "0 3 * * *", "weekdays": ""}, "weekdays"),
    (
        {"kind": "cron", "cron_expression": "0 3 * * *", "exclude_calendars": ["Nope"]},
        "exclude_calendars",
    ),
]


@pytest.mark.parametrize(("trigger", "field"), BAD_TRIGGERS, ids=[f for _, f in BAD_TRIGGERS])
def test_bad_trigger_names_its_field_and_changes_nothing(
    client: Any, cron_job: Job, trigger: dict[str, Any], field: str
) -> None:
    before = snapshot(cron_job)
    good = {"kind": "interval", "interval_seconds": 60}
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"triggers": [good, trigger]})
    assert response.status_code == 400
    errors = response.json()["triggers"]
    assert list(errors) == ["1"] and field in errors["1"], errors  # by index, the bad one only
    assert snapshot(cron_job) == before
    jobs_before = Job.objects.count()
    created = write(
        client, "post", "/api/v1/jobs", {"name": "n", "target": "tests.echo", "triggers": [trigger]}
    )
    assert created.status_code == 400 and field in created.json()["triggers"]["0"]
    assert Job.objects.count() == jobs_before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"catchup_window_s": -5}, "catchup_window_s"),
        ({"max_instances": 0}, "max_instances"),
        ({"retry_jitter": 2.0}, "retry_jitter"),
        ({"target": "no.such.callable"}, "target"),
    ],
)
def test_the_api_says_what_the_admin_says(
    client: Any, cron_job: Job, fields: dict[str, Any], field: str
) -> None:
    """One validation path: the API's message is the model validation's
    (the admin form's) message for the same value."""
    job = Job.objects.get(pk=cron_job.pk)
    for name, value in fields.items():
        setattr(job, name, value)
    with pytest.raises(ValidationError) as raised:
        job.full_clean()
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", fields)
    assert response.json()[field] == raised.value.message_dict[field]


def test_code_managed_job_accepts_only_the_operator_switches(client: Any, cron_job: Job) -> None:
    Job.objects.filter(pk=cron_job.pk).update(code_managed=True)
    before = snapshot(cron_job)
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"name": "renamed"})
    assert response.status_code == 400 and "name" in response.json()
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"interval_minutes": 5})
    assert response.status_code == 400 and "triggers" in response.json()
    assert write(client, "delete", f"/api/v1/jobs/{cron_job.pk}").status_code == 400
    assert snapshot(cron_job) == before
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False})
    assert response.status_code == 200
    assert not Job.objects.get(pk=cron_job.pk).enabled


# --- refusals --------------------------------------------------------------------------


def test_a_session_write_without_csrf_token_is_refused(cron_job: Job) -> None:
    client = SessionClient(user_with(*JOB_PERMS))
    before = snapshot(cron_job)
    response = client.send("patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False}, csrf=False)
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert snapshot(cron_job) == before
    # Reading needs no CSRF token.
    assert client.get(f"/api/v1/jobs/{cron_job.pk}").status_code == 200


def test_the_spec_spelling_of_the_csrf_header_works(cron_job: Job) -> None:
    client = SessionClient(user_with(*JOB_PERMS), header="X-CSRF-Token")
    response = client.send("patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False})
    assert response.status_code == 200


@pytest.mark.parametrize("token", ["takt_deadbeef_not-a-real-secret", "garbage", "takt_"], ids=str)
def test_a_wrong_token_is_refused(cron_job: Job, token: str) -> None:
    client = TokenClient(token)
    assert client.get("/api/v1/jobs").status_code == 401
    assert (
        client.send("patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False}).status_code == 401
    )
    assert Job.objects.get(pk=cron_job.pk).enabled


def test_revoked_and_expired_tokens_are_refused(cron_job: Job) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from jobs.tokens import ApiToken

    user = user_with(*JOB_PERMS)
    revoked, expired = make_token(user=user, name="r"), make_token(user=user, name="e")
    ApiToken.objects.filter(name="r").update(revoked=True)
    ApiToken.objects.filter(name="e").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert TokenClient(revoked).get("/api/v1/jobs").status_code == 401
    assert TokenClient(expired).get("/api/v1/jobs").status_code == 401


def test_anonymous_is_refused(cron_job: Job) -> None:
    from django.test import Client

    assert Client().get("/api/v1/jobs").status_code in (401, 403)


def test_model_permissions_are_followed(cron_job: Job) -> None:
    viewer = TokenClient(make_token(user=user_with("takt_jobs.view_job", username="viewer")))
    assert viewer.get("/api/v1/jobs").status_code == 200
    assert (
        viewer.send("patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False}).status_code == 403
    )
    assert viewer.send("delete", f"/api/v1/jobs/{cron_job.pk}").status_code == 403
    assert viewer.send("post", f"/api/v1/jobs/{cron_job.pk}/pause", {}).status_code == 403
    nobody = TokenClient(make_token(user=user_with(username="nobody")))
    assert nobody.get("/api/v1/jobs").status_code == 403
    assert Job.objects.get(pk=cron_job.pk).enabled


def test_a_job_token_cannot_read_or_edit_jobs(cron_job: Job) -> None:
    client = TokenClient(make_token(job=cron_job))
    assert client.get("/api/v1/jobs").status_code == 403
    assert client.get(f"/api/v1/jobs/{cron_job.pk}").status_code == 403
    assert (
        client.send("patch", f"/api/v1/jobs/{cron_job.pk}", {"enabled": False}).status_code == 403
    )
    assert Job.objects.get(pk=cron_job.pk).enabled


def test_the_schema_is_served(client: Any) -> None:
    response = client.get("/api/v1/schema", format="json")
    assert response.status_code == 200
    text = response.content.decode()
    assert "/api/v1/jobs/{id}/run" in text and "interval_minutes" in text


def test_resending_a_trigger_in_another_spelling_keeps_it(client: Any, cron_job: Job) -> None:
    """A trigger list sent again, in the spellings a user types, keeps the
    stored trigger (and its next fire time) instead of recreating it."""
    stored = Trigger.objects.get(job=cron_job)
    Trigger.objects.filter(pk=stored.pk).update(timezone="Europe/Berlin", weekdays="01234")
    entry = {
        "kind": "cron",
        "cron_expression": "0  3 * * *",
        "timezone": "europe/berlin",
        "weekdays": "43210",
    }
    response = write(client, "patch", f"/api/v1/jobs/{cron_job.pk}", {"triggers": [entry]})
    assert response.status_code == 200, response.json()
    assert [t["id"] for t in response.json()["triggers"]] == [stored.pk]


def test_the_swagger_ui_is_served_without_a_cdn(client: Any) -> None:
    from django.contrib.staticfiles import finders

    page = client.get("/api/v1/docs").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert "cdn" not in page.lower()
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
