"""Cancelling from outside: `POST /api/v1/runs/<id>/cancel` (answers,
permissions, job tokens, the schema) and `manage.py cancel_run` (its
output and exit status)."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from jobs.models import Job
from runs.ending import finish_run
from runs.locks import job_lock
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, start_run
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import SECOND, make_job, utc
from tests.processes import ROOT, free_port

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
CAN_CANCEL = ("takt_runs.view_run", "takt_runs.cancel_run")


@pytest.fixture(autouse=True)
def _redis(redis_client: Any) -> None:
    """Locks, markers and the decision log live in the private Redis."""


def queued(job: Job | None = None) -> Run:
    return create_run(job or make_job("export"), trigger=RunTrigger.MANUAL, now=T0)


def running(job: Job | None = None) -> Run:
    run = queued(job)
    assert start_run(run, worker="celery@host-a", now=T0)
    assert job_lock(run.job_id, run_id=run.pk).acquire()
    return run


def ended(job: Job | None = None) -> Run:
    run = running(job)
    assert finish_run(run, status=RunStatus.SUCCEEDED, now=T0 + 3 * SECOND)
    return run


def cancel_path(run_id: int) -> str:
    return f"/api/v1/runs/{run_id}/cancel"


# --- the API ---------------------------------------------------------------------------


def test_a_user_with_the_permission_cancels_and_gets_the_run():
    run = running()
    client = SessionClient(user_with(*CAN_CANCEL, username="alice"))

    response = client.send("post", cancel_path(run.pk))

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["status"], body["cancelled_by"]) == (run.pk, "cancelled", "alice")
    assert body["message"] == "cancelled by alice"
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_a_finished_run_gets_409_naming_the_status_and_stays_as_it_was():
    run = ended()
    client = SessionClient(user_with(*CAN_CANCEL, username="alice"))

    response = client.send("post", cancel_path(run.pk))

    assert response.status_code == 409
    assert response.json() == {
        "status": [
            f"run #{run.pk} already ended succeeded at 2026-06-01 08:00:03 UTC;"
            " only a queued or running run can be cancelled"
        ]
    }
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_an_unknown_run_gets_404():
    client = SessionClient(user_with(*CAN_CANCEL, username="alice"))
    assert client.send("post", cancel_path(999999)).status_code == 404


@pytest.mark.parametrize("perms", [(), ("takt_runs.view_run",), ("takt_runs.cancel_run",)])
def test_without_both_permissions_a_user_is_refused(perms):
    run = queued()
    client = SessionClient(user_with(*perms, username="bob"))

    assert client.send("post", cancel_path(run.pk)).status_code == 403
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_a_session_without_the_csrf_token_is_refused():
    run = queued()
    client = SessionClient(user_with(*CAN_CANCEL, username="alice"))
    response = client.send("post", cancel_path(run.pk), csrf=False)
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_a_users_token_cancels_with_the_users_permissions_and_name():
    user = user_with(*CAN_CANCEL, username="carol")
    response = TokenClient(make_token(user=user)).send("post", cancel_path(queued().pk))
    assert (response.status_code, response.json()["cancelled_by"]) == (200, "carol")


@pytest.mark.parametrize("permission", ["token", "authenticated"])
def test_a_jobs_token_cancels_its_jobs_runs_where_it_may_start_the_job(permission):
    job = make_job("from-b", api_trigger_permission=permission)
    client = TokenClient(make_token(job=job, name="host-b"))

    response = client.send("post", cancel_path(running(job).pk))

    assert response.status_code == 200
    assert response.json()["cancelled_by"] == "token:host-b"


def test_a_jobs_token_is_refused_where_it_may_not_start_the_job_or_for_other_jobs():
    job = make_job("closed", api_trigger_permission="off")
    client = TokenClient(make_token(job=job, name="host-b"))
    mine = queued(job)

    response = client.send("post", cancel_path(mine.pk))
    assert response.status_code == 403 and "api_trigger_permission" in response.json()

    other = queued(make_job("other", api_trigger_permission="token"))
    assert client.send("post", cancel_path(other.pk)).status_code == 404  # not even seen
    assert {r.status for r in Run.objects.all()} == {RunStatus.QUEUED}


def test_the_schema_documents_the_cancel_and_its_refusals():
    admin = SessionClient(user_with(superuser=True, username="root"))
    schema = admin.get("/api/v1/schema", format="json").json()
    operation = schema["paths"]["/api/v1/runs/{id}/cancel/"]["post"]
    responses = operation["responses"]
    assert {"200", "403", "404", "409", "503"} <= set(responses)
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Run")
    refused = responses["409"]["content"]["application/json"]["schema"]["$ref"]
    assert (
        schema["components"]["schemas"][refused.rsplit("/", 1)[1]]["properties"]["status"]["type"]
        == "array"
    )
    assert "cancelled_by" in schema["components"]["schemas"]["Run"]["properties"]


# --- manage.py cancel_run -----------------------------------------------------------------


def cancel_command(*args: str) -> str:
    out = StringIO()
    call_command("cancel_run", *args, stdout=out)
    return out.getvalue()


def test_the_command_cancels_a_queued_run_and_says_so():
    run = queued()
    assert cancel_command(str(run.pk), "--by", "ops") == (
        f"run #{run.pk} of job #{run.job_id} (export) cancelled by ops before it started\n"
    )
    assert Run.objects.get(pk=run.pk).cancelled_by == "ops"


def test_the_command_cancels_a_running_run_and_says_what_happens_next(settings):
    settings.TAKT_CANCEL_GRACE_SECONDS = 7
    run = running()
    out = cancel_command(str(run.pk), "--by", "ops")
    assert out.startswith(f"run #{run.pk} of job #{run.job_id} (export) cancelled by ops after ")
    assert out.endswith(
        " s on celery@host-a: its job's lock is free and its process is told to stop"
        " (killed after 7 s if it goes on)\n"
    )


def test_the_command_names_its_user_when_no_by_is_given(monkeypatch):
    monkeypatch.setenv("LOGNAME", "deployer")
    run = queued()
    cancel_command(str(run.pk))
    assert Run.objects.get(pk=run.pk).cancelled_by == "deployer (manage.py)"


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (ended, "already ended succeeded at 2026-06-01 08:00:03 UTC"),
        (None, "run #999999 does not exist"),
    ],
)
def test_the_command_exits_non_zero_with_the_message(make, message):
    run_id = make().pk if make else 999999
    with pytest.raises(CommandError, match=message) as failed:
        cancel_command(str(run_id))
    assert failed.value.returncode == 1


def test_the_command_says_which_redis_it_could_not_reach():
    run = queued()
    url = f"redis://127.0.0.1:{free_port()}/3"
    with override_settings(REDIS_URL=url), pytest.raises(CommandError) as failed:
        cancel_command(str(run.pk))
    assert str(failed.value).startswith(f"cannot reach Redis at {url} ")
    assert failed.value.returncode == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


@pytest.mark.parametrize("value", ["0", "ten"])
def test_a_bad_grace_period_stops_the_process_naming_the_setting(value):
    done = subprocess.run(
        [sys.executable, "manage.py", "cancel_run", "1"],
        cwd=ROOT,
        env={**os.environ, "TAKT_CANCEL_GRACE_SECONDS": value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "TAKT_CANCEL_GRACE_SECONDS: " in done.stderr and repr(value) in done.stderr
