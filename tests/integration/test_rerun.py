"""Running an ended run again (issue 30, runs/rerun.py): the service and
`manage.py rerun`, against the real database and Redis broker."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs.errors import InvalidInput, MaintenanceMode
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import set_maintenance
from runs.rerun import RunNotRerunnable, failed_since, rerun
from runs.services import create_run
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with
from tests.integration.conftest import SECOND, broker_task_ids, make_job, utc

T0 = utc(2026, 6, 1, 8, 0)
pytestmark = pytest.mark.django_db(transaction=True)


def ended(job, *, status=RunStatus.FAILED, at=T0, params=None, **fields):
    run = create_run(job, trigger=RunTrigger.SCHEDULE, now=at, params=params)
    Run.objects.filter(pk=run.pk).update(
        status=status, started_at=at, finished_at=at + SECOND, **fields
    )
    run.refresh_from_db()
    return run


def test_an_ended_run_is_run_again_with_its_params_linked_to_it(redis_client):
    job = make_job("Export", params={"region": "eu"})
    old = ended(job, params={"region": "us", "day": "2026-05-31"})
    job.params = {"region": "eu", "format": "csv"}  # the job gained a key since
    job.save()

    new = rerun(old.pk)

    new.refresh_from_db()
    assert (new.trigger, new.status, new.rerun_of_id) == (RunTrigger.MANUAL, "queued", old.pk)
    assert new.params == {"region": "us", "day": "2026-05-31", "format": "csv"}
    assert f"takt-run-{new.pk}" in broker_task_ids(redis_client)
    assert list(old.reruns.all()) == [new]


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING])
def test_a_run_still_under_way_is_not_run_again_and_nothing_is_made(redis_client, status):
    job = make_job("Export")
    active = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    Run.objects.filter(pk=active.pk).update(status=status)

    with pytest.raises(RunNotRerunnable, match=f"run #{active.pk} is still"):
        rerun(active.pk)

    assert Run.objects.count() == 1


def test_an_unknown_run_is_named(redis_client):
    with pytest.raises(InvalidInput) as refused:
        rerun(4242)
    assert refused.value.field == "run" and "4242" in str(refused.value)


def test_a_re_run_is_admitted_as_run_now_is(redis_client):
    """Maintenance refuses it (nothing made); a busy `skip` job records it
    skipped, as "Run now" does."""
    job = make_job("Export", overlap_policy="skip")
    old = ended(job)
    set_maintenance(True, note="upgrade", now=T0)
    with pytest.raises(MaintenanceMode):
        rerun(old)
    assert Run.objects.count() == 1
    set_maintenance(False, now=T0)

    busy = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    Run.objects.filter(pk=busy.pk).update(status=RunStatus.RUNNING, started_at=T0)
    skipped = rerun(old)
    assert skipped.status == RunStatus.SKIPPED and skipped.rerun_of_id == old.pk


def test_failed_since_lists_what_went_wrong_and_nothing_repeats_yet(redis_client):
    job = make_job("Export")
    other = make_job("Other")
    before = ended(job, at=T0 - 3600 * SECOND)
    failed = ended(job, at=T0)
    timed_out = ended(job, status=RunStatus.TIMED_OUT, at=T0 + SECOND)
    lost = ended(job, status=RunStatus.LOST, at=T0 + 2 * SECOND)
    ended(job, status=RunStatus.SUCCEEDED, at=T0 + 3 * SECOND)
    retried = ended(job, at=T0 + 4 * SECOND)
    Run.objects.create(
        job=job, trigger=RunTrigger.RETRY, scheduled_for=T0 + 9 * SECOND,
        enqueued_at=T0 + 5 * SECOND, retry_of=retried,
    )  # fmt: skip
    rerun_already = ended(job, at=T0 + 6 * SECOND)
    rerun(rerun_already)
    ended(other, at=T0)

    assert failed_since(job.pk, T0) == [failed.pk, timed_out.pk, lost.pk]
    assert before.pk not in failed_since(job.pk, T0)


def test_the_command_re_runs_runs_by_id_and_a_jobs_failures_since(redis_client):
    job = make_job("Export", overlap_policy="allow", max_instances=3)
    first, second = ended(job), ended(job, status=RunStatus.LOST, at=T0 + SECOND)
    out = StringIO()

    call_command("rerun", str(first.pk), stdout=out)

    new = Run.objects.get(rerun_of=first)
    assert out.getvalue() == f"run #{new.pk} re-runs run #{first.pk} of job #{job.pk}: queued\n"
    out = StringIO()
    call_command("rerun", "--job", str(job.pk), "--failed-since", T0.isoformat(), stdout=out)
    again = Run.objects.get(rerun_of=second)
    assert out.getvalue() == f"run #{again.pk} re-runs run #{second.pk} of job #{job.pk}: queued\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([], "give the ids of the runs to re-run"),
        (["--job", "1"], "--job and --failed-since go together"),
        (["--job", "1", "--failed-since", "yesterday"], "--failed-since: not an ISO-8601"),
        (["9999"], "run #9999: run: no run with id 9999"),
    ],
)
def test_the_command_names_what_is_wrong(redis_client, args, said):
    with pytest.raises(CommandError, match=said):
        call_command("rerun", *args, stdout=StringIO())
    assert not Run.objects.exists()


# --- POST /api/v1/runs/<id>/rerun ------------------------------------------------------


def rerun_path(run_id: int) -> str:
    return f"/api/v1/runs/{run_id}/rerun"


def test_a_user_who_may_start_the_job_re_runs_through_the_api(redis_client):
    job = make_job("Export", api_trigger_permission="authenticated", caller_params=["day"])
    old = ended(job, params={"day": "2026-05-31"})
    client = SessionClient(user_with("takt_runs.view_run", username="alice"))

    response = client.send("post", rerun_path(old.pk))

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["rerun_of"], body["trigger"], body["params"]) == (
        old.pk, "manual", {"day": "2026-05-31"},
    )  # fmt: skip
    assert Run.objects.get(pk=body["id"]).rerun_of_id == old.pk


@pytest.mark.parametrize(
    ("job_fields", "perms", "field"),
    [
        ({"api_trigger_permission": "off"}, ("takt_runs.view_run",), "api_trigger_permission"),
        ({"api_trigger_permission": "authenticated"}, (), "detail"),
        ({"api_trigger_permission": "authenticated", "caller_params": []},
         ("takt_runs.view_run",), "params.day"),
    ],
    ids=["api-off", "no-view-permission", "a-param-the-caller-may-not-set"],
)  # fmt: skip
def test_the_api_refuses_a_re_run_the_caller_may_not_start_and_makes_nothing(
    redis_client, job_fields, perms, field
):
    job = make_job("Export", **job_fields)
    old = ended(job, params={"day": "2026-05-31"})
    client = SessionClient(user_with(*perms, username="bob"))

    response = client.send("post", rerun_path(old.pk))

    assert response.status_code in (400, 403), response.content
    assert field in response.json(), response.json()
    assert Run.objects.count() == 1


def test_the_api_refuses_a_run_under_way_and_a_body_and_makes_nothing(redis_client):
    job = make_job("Export", api_trigger_permission="authenticated", caller_params=["*"])
    active = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    old = ended(job)
    client = SessionClient(user_with("takt_runs.view_run", username="alice"))

    under_way = client.send("post", rerun_path(active.pk))
    with_body = client.send("post", rerun_path(old.pk), {"params": {"x": 1}})

    assert under_way.status_code == 409 and "is still" in under_way.json()["status"][0]
    assert with_body.status_code == 400, with_body.content
    assert Run.objects.count() == 2


def test_a_jobs_token_re_runs_its_jobs_runs_only(redis_client):
    job = make_job("Export", api_trigger_permission="token")
    other = make_job("Other", api_trigger_permission="token")
    mine, theirs = ended(job), ended(other)
    client = TokenClient(make_token(job=job))

    assert client.send("post", rerun_path(mine.pk)).status_code == 201
    assert client.send("post", rerun_path(theirs.pk)).status_code == 404
    assert not Run.objects.filter(rerun_of=theirs).exists()
