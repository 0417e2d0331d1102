"""The admin's long operations (F-93): the Import jobs page (dry-run plan
at once, errors naming the job and field, Import as an operation), and
the job actions that run as operations (backfill; Run now on more than
20 jobs)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from runs.models import Run, RunStatus, RunTrigger
from runs.operations import operations_job
from runs.queue import pause_queue
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/takt_jobs/job/import/"
CHANGELIST = "/admin/takt_jobs/job/"
NIGHTLY = {"key": "reports.nightly", "name": "Nightly", "target": "tests.echo",
           "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}]}  # fmt: skip


def operation_runs() -> list[Run]:
    return list(Run.objects.filter(job__key="takt.operations").order_by("pk"))


def test_the_job_list_links_to_the_import_page_and_the_urls_are_named(admin_client):
    assert reverse("admin:takt_jobs_job_import") == IMPORT_URL
    page = admin_client.get(CHANGELIST).content.decode()
    assert f'href="{IMPORT_URL}"' in page and "Import jobs" in page


def test_the_import_page_needs_the_add_and_change_permissions():
    viewer = Client()
    viewer.force_login(user_with("takt_jobs.view_job", "takt_jobs.change_job", username="viewer"))
    assert viewer.get(IMPORT_URL).status_code == 403
    assert 'href="/admin/takt_jobs/job/import/"' not in viewer.get(CHANGELIST).content.decode()
    editor = Client()
    editor.force_login(user_with("takt_jobs.add_job", "takt_jobs.change_job", username="editor"))
    assert editor.get(IMPORT_URL).status_code == 200


def test_checking_pasted_jobs_shows_the_dry_run_plan_and_writes_nothing(admin_client):
    make_job("Backup", key="backup", priority=5)
    text = json.dumps([NIGHTLY, {"key": "backup", "name": "Backup", "target": "tests.echo",
                                 "priority": 1}])  # fmt: skip

    page = admin_client.post(IMPORT_URL, {"text": text, "format": "json", "check": "Check"})

    html = page.content.decode()
    assert page.status_code == 200
    assert page.context["plan"].splitlines() == [
        "create     job 1 (key 'reports.nightly', name 'Nightly')",
        "update     job 2 (key 'backup', name 'Backup')",
        "    priority: 5 → 1",
        "dry run, nothing written: 1 create, 1 update, 0 unchanged",
    ]
    assert 'name="import"' in html  # Import is offered for what was checked
    assert not Job.objects.filter(key="reports.nightly").exists()
    assert Job.objects.get(key="backup").priority == 5
    assert not operation_runs()


def test_a_file_with_errors_shows_each_problem_naming_the_job_and_field_and_no_import(
    admin_client,
):
    bad = [NIGHTLY, {**NIGHTLY, "key": "x", "triggers": [{"kind": "cron", "cron_expression": "0 25 * * *"}]},
           {"name": "No target", "colour": "red"}]  # fmt: skip
    upload = SimpleUploadedFile("jobs.yaml", json.dumps(bad).encode(), "application/x-yaml")

    page = admin_client.post(IMPORT_URL, {"file": upload, "check": "Check"})

    problems = page.context["check"].problems
    assert "job 2 (key 'x', name 'Nightly'): triggers[0].cron_expression: hour: 25" in problems[0]
    assert "job 3 (name 'No target'): colour: unknown field" in problems
    html = page.content.decode()
    assert "Nothing can be imported: 2 problems" in html and 'name="import"' not in html
    assert page.context["form"].initial["source"] == "jobs.yaml"  # the file's text is kept
    assert not Job.objects.filter(key="reports.nightly").exists()


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"text": "  "}, "text", "upload a file or paste the jobs here"),
        ({"file": SimpleUploadedFile("x.yaml", b"\xff\xfe not utf-8")}, "file", "must be UTF-8"),
    ],
)
def test_nothing_to_import_gets_a_field_error(admin_client, data, field, message):
    page = admin_client.post(IMPORT_URL, {**data, "check": "Check"})
    assert message in page.context["form"].errors[field][0]


def test_import_starts_the_operation_for_the_checked_text_and_shows_its_run(admin_client):
    text = json.dumps([NIGHTLY])
    checked = admin_client.post(IMPORT_URL, {"text": text, "format": "json", "check": "Check"})
    form = checked.context["form"].initial

    done = admin_client.post(IMPORT_URL, {**form, "import": "Import"}, follow=True)

    (run,) = operation_runs()
    assert done.redirect_chain == [(reverse("admin:takt_runs_run_change", args=[run.pk]), 302)]
    assert f"The import of pasted text started as run #{run.pk}" in done.content.decode()
    assert (run.trigger, run.status, run.params["operation"], run.started_by) == (
        RunTrigger.MANUAL, RunStatus.QUEUED, "import_jobs", "admin",
    )  # fmt: skip
    assert json.loads(run.params["text"]) == [NIGHTLY] and run.params["format"] == "json"


def test_import_of_text_changed_since_the_check_shows_the_new_plan_first(admin_client):
    checked = admin_client.post(
        IMPORT_URL, {"text": json.dumps([NIGHTLY]), "format": "json", "check": "Check"}
    )
    form = {**checked.context["form"].initial, "text": json.dumps([{**NIGHTLY, "name": "Other"}])}

    page = admin_client.post(IMPORT_URL, {**form, "import": "Import"})

    assert page.status_code == 200 and not operation_runs()
    assert "name 'Other'" in page.context["plan"]
    assert "changed since the check" in page.content.decode()


def test_run_now_on_more_than_20_jobs_runs_as_an_operation_and_shows_its_run(admin_client):
    jobs = [make_job(f"job {n}") for n in range(21)]

    done = admin_client.post(
        CHANGELIST, {"action": "run_now", "_selected_action": [j.pk for j in jobs]}, follow=True
    )

    (run,) = operation_runs()
    assert done.redirect_chain[-1][0] == reverse("admin:takt_runs_run_change", args=[run.pk])
    assert sorted(run.params["jobs"]) == sorted(j.pk for j in jobs)
    assert run.params["operation"] == "bulk_run"
    assert not Run.objects.filter(job__in=jobs).exists()  # the worker starts them

    twice = admin_client.post(
        CHANGELIST, {"action": "run_now", "_selected_action": [j.pk for j in jobs]}, follow=True
    )
    assert f"is already under way as run #{run.pk}" in twice.content.decode()
    assert len(operation_runs()) == 1


def test_a_backfill_refused_by_the_operation_shows_the_error_on_the_form(admin_client):
    """The form's own checks pass; the operation refuses to start (the
    queue is paused): its reason is on the form, nothing is started. (A
    time in the future the form refuses itself, beside its field.)"""
    job = make_job("hourly")
    make_trigger(job, created_at=utc(2025, 3, 29), kind="interval", interval_seconds=3600)
    selected = {"action": "backfill", "_selected_action": [job.pk], "apply": "1"}
    future = admin_client.post(CHANGELIST, {**selected, "start": "2025-03-29 13:00",
                                            "end": "2999-01-01 00:00"})  # fmt: skip
    assert future.context["form"].errors["end"] == ["2999-01-01 00:00 CET is in the future"]
    pause_queue(note="deploy", until=None, by="ops", now=timezone.now())

    page = admin_client.post(CHANGELIST, {**selected, "start": "2025-03-29 13:00",
                                          "end": "2025-03-29 15:00"})  # fmt: skip

    assert page.status_code == 200
    assert "the queue is paused" in " ".join(page.context["form"].non_field_errors())
    assert not operation_runs()


def test_the_operations_job_shows_in_the_admin_read_only_with_its_runs_as_history(admin_client):
    job = operations_job()
    run = Run.objects.create(job=job, trigger=RunTrigger.MANUAL, status=RunStatus.SUCCEEDED,
                             scheduled_for=utc(2026, 6, 1), enqueued_at=utc(2026, 6, 1),
                             params={"operation": "bulk_run"})  # fmt: skip

    page = admin_client.get(reverse("admin:takt_jobs_job_change", args=[job.pk]))

    assert page.status_code == 200
    form = page.context["adminform"].form
    assert "target" not in form.fields and "enabled" in form.fields  # code-managed
    assert reverse("admin:takt_runs_run_change", args=[run.pk]) in page.content.decode()
    assert "Takt operations" in admin_client.get(CHANGELIST).content.decode()


def test_the_api_lists_the_operations_job_and_refuses_to_change_or_start_it():
    job = operations_job()
    client = SessionClient(
        user_with("takt_jobs.view_job", "takt_jobs.change_job", "takt_runs.view_run")
    )
    listed = client.get("/api/v1/jobs", name="Takt operations").json()["results"]
    assert [(j["id"], j["code_managed"], j["enabled"]) for j in listed] == [(job.pk, True, False)]
    refused = client.send("patch", f"/api/v1/jobs/{job.pk}", {"target": "tests.echo"})
    assert refused.status_code == 400 and "declared in code" in str(refused.json())
    assert client.send("post", f"/api/v1/jobs/{job.pk}/run", {}).status_code == 403
    assert not job.runs.exists() and operations_job().target == "takt.operation"
