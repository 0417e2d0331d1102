"""The Django admin (F-90, F-91, F-27, section 11): the job editor with its
trigger inline, "Run now", enable/disable, and the list pages."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import transaction
from django.urls import reverse

from jobs.models import Job, Trigger
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.conftest import SECOND, hourly, job_form_fields, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

# Requests travel to a fixed past instant (the login session stays valid).
T0 = utc(2025, 3, 29, 12, 0)  # the day before Berlin springs forward


def job_form(job: Job, *triggers: dict, initial: int = 0, **changes) -> dict:
    """POST data of the job change form with the TriggerInline formset."""
    data = {
        **job_form_fields(job),
        "triggers-TOTAL_FORMS": len(triggers),
        "triggers-INITIAL_FORMS": initial,
        "triggers-MIN_NUM_FORMS": 0,
        "triggers-MAX_NUM_FORMS": 1000,
    }
    data.update(changes)
    for i, row in enumerate(triggers):
        data.update({f"triggers-{i}-{name}": value for name, value in row.items()})
    return data


def trigger_row(job: Job, trigger: Trigger | None = None, **changes) -> dict:
    row = {
        "id": trigger.pk if trigger else "",
        "job": job.pk,
        "kind": "cron",
        "enabled": "on",
        "cron_expression": trigger.cron_expression if trigger else "",
        "timezone": trigger.timezone if trigger else "",
        "interval_seconds": "",
        "interval_anchor": "from_enqueue",
        "start_at_0": "",
        "start_at_1": "",
        "run_at_0": "",
        "run_at_1": "",
    }
    row.update(changes)
    return row


def change_url(job: Job) -> str:
    return reverse("admin:takt_jobs_job_change", args=[job.pk])


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"cron_expression": "61 * * * *"}, "cron_expression", "minute: 61 is out of range 0-59"),
        ({"cron_expression": "0 0 31 4 *"}, "cron_expression", "never fires"),
        ({"timezone": "Mars/Olympus"}, "timezone", "unknown time zone"),
        (
            {"kind": "interval", "interval_seconds": "0"},
            "interval_seconds",
            "between 1 second and 30 days",
        ),
    ],
)
def test_an_invalid_trigger_in_the_admin_shows_the_field_error_and_saves_nothing(
    admin_client, changes, field, message
):
    job = make_job("nightly")
    trigger = hourly(job, created_at=T0)
    before = Trigger.objects.filter(pk=trigger.pk).values().get()
    data = job_form(job, trigger_row(job, trigger, **changes), initial=1, name="renamed")

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert list(formset.errors[0]) == [field]
    assert message in formset.errors[0][field][0]
    assert message in response.content.decode()
    assert Trigger.objects.filter(pk=trigger.pk).values().get() == before
    assert Job.objects.get(pk=job.pk).name == "nightly"


def test_adding_a_cron_trigger_in_the_admin_saves_it_with_its_next_run(admin_client):
    job = make_job("nightly")
    data = job_form(job, trigger_row(job, cron_expression="30 2 * * *", timezone="europe/berlin"))

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 302, response.context and response.context["errors"]
    trigger = job.triggers.get()
    assert (trigger.cron_expression, trigger.timezone, trigger.active) == (
        "30 2 * * *",
        "Europe/Berlin",
        True,
    )
    assert trigger.next_run_at == utc(2025, 3, 30, 1, 0)  # 02:30 does not exist: 03:00 CEST


@pytest.mark.parametrize("enabled", [True, False])
def test_the_run_now_button_creates_a_manual_run_also_for_a_disabled_job(admin_client, enabled):
    job = make_job("nightly", enabled=enabled)

    response = admin_client.post(reverse("admin:takt_jobs_job_run_now", args=[job.pk]), follow=True)

    run = Run.objects.get()
    assert (run.job, run.trigger, run.status) == (job, RunTrigger.MANUAL, RunStatus.QUEUED)
    assert response.redirect_chain == [(change_url(job), 302)]
    assert f"Run #{run.pk}</a> queued." in response.content.decode()


def test_the_run_now_button_needs_a_post(admin_client):
    job = make_job()
    assert (
        admin_client.get(reverse("admin:takt_jobs_job_run_now", args=[job.pk])).status_code == 405
    )
    assert not Run.objects.exists()


def test_the_job_and_run_pages_render(admin_client):
    job = make_job("nightly report", params={"day": "today"})
    hourly(job, created_at=T0)
    make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=5400, interval_anchor="from_finish"
    )
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.FAILED, output="line one\n<b>line two</b>"
    )

    pages = {
        "job list": reverse("admin:takt_jobs_job_changelist"),
        "job editor": change_url(job),
        "run list": reverse("admin:takt_runs_run_changelist"),
        "run list for the job": reverse("admin:takt_runs_run_changelist") + f"?job={job.pk}",
        "run": reverse("admin:takt_runs_run_change", args=[run.pk]),
    }
    for name, url in pages.items():
        response = admin_client.get(url)
        assert response.status_code == 200, name
        assert "nightly report" in response.content.decode(), name
    editor = admin_client.get(change_url(job)).content.decode()
    assert "&lt;b&gt;line two&lt;/b&gt;" in editor  # run output is escaped
    job_list = admin_client.get(reverse("admin:takt_jobs_job_changelist")).content.decode()
    # A zone name may wrap after its slash in a narrow column (jobs.admin.display.breakable).
    schedule = "Every hour (Europe/<wbr>Berlin); every 90 minutes after the previous run ends"
    assert schedule in job_list


def test_disabling_in_the_editor_and_enabling_by_action_keeps_the_old_next_run(admin_client):
    job = make_job("nightly")
    trigger = hourly(job, created_at=T0)
    next_run_at = trigger.next_run_at
    data = job_form(job, trigger_row(job, trigger), initial=1)
    del data["enabled"]

    with time_machine.travel(T0 + 5 * 3600 * SECOND, tick=False):
        assert admin_client.post(change_url(job), data).status_code == 302
        trigger.refresh_from_db()
        assert (trigger.active, trigger.next_run_at) == (False, next_run_at)

        response = admin_client.post(
            reverse("admin:takt_jobs_job_changelist"),
            {"action": "enable", "_selected_action": [job.pk]},
        )

    assert response.status_code == 302
    trigger.refresh_from_db()
    assert (trigger.active, trigger.next_run_at) == (True, next_run_at)  # caught up once (F-27)
    assert Job.objects.get(pk=job.pk).enabled is True


def test_the_run_now_action_starts_one_manual_run_per_selected_job(admin_client):
    jobs = [make_job("a"), make_job("b", enabled=False)]

    response = admin_client.post(
        reverse("admin:takt_jobs_job_changelist"),
        {"action": "run_now", "_selected_action": [j.pk for j in jobs]},
    )

    assert response.status_code == 302
    assert sorted(Run.objects.values_list("job__name", "trigger", "status")) == [
        ("a", RunTrigger.MANUAL, RunStatus.QUEUED),
        ("b", RunTrigger.MANUAL, RunStatus.QUEUED),
    ]


def test_params_with_nan_in_the_admin_get_a_field_error(admin_client):
    job = make_job("nightly", params={"ratio": 0.5})

    with transaction.atomic():
        response = admin_client.post(change_url(job), job_form(job, params='{"ratio": NaN}'))

    assert response.status_code == 200
    assert "params" in response.context["adminform"].form.errors
    assert Job.objects.get(pk=job.pk).params == {"ratio": 0.5}


def test_args_of_a_celery_task_target_are_saved_from_the_editor(admin_client):
    job = make_job("beat task", target="tests.celery_echo")

    assert admin_client.post(change_url(job), job_form(job, args='[1, "x"]')).status_code == 302
    assert Job.objects.get(pk=job.pk).args == [1, "x"]

    assert admin_client.post(change_url(job), job_form(job, args="")).status_code == 302
    assert Job.objects.get(pk=job.pk).args == []  # an emptied box: no arguments


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        (
            "tests.echo",
            "[1]",
            "only a Celery task target takes positional arguments: 'tests.echo' is registered"
            " with @takt_job and gets the run's context (give it params)",
        ),
        ("tests.celery_echo", '{"k": 2}', 'must be a JSON list, e.g. [1, "x"]'),
    ],
)
def test_refused_args_in_the_admin_get_a_field_error(admin_client, target, args, message):
    job = make_job("nightly", target=target, params={"k": 2})

    with transaction.atomic():
        response = admin_client.post(change_url(job), job_form(job, args=args))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["args"] == [message]
    assert Job.objects.get(pk=job.pk).args == []


def test_a_spent_once_trigger_made_in_code_does_not_block_editing_its_job(admin_client):
    job = make_job("one-off")
    run_at = T0 + timedelta(hours=1, microseconds=123456)  # e.g. timezone.now() + 1 h
    trigger = make_trigger(job, created_at=T0, kind="once", run_at=run_at)
    # What the browser posts back unchanged: the local date and time, to the second.
    row = trigger_row(job, trigger, kind="once", run_at_0="2025-03-29", run_at_1="14:00:00")

    with time_machine.travel(T0 + 3 * 3600 * SECOND, tick=False):
        response = admin_client.post(change_url(job), job_form(job, row, initial=1, notes="moved"))

    assert response.status_code == 302, response.context["inline_admin_formsets"][0].formset.errors
    assert Job.objects.get(pk=job.pk).notes == "moved"


def test_the_backfill_action_asks_for_a_range_then_creates_the_runs(admin_client):
    job = make_job("hourly")
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=3600, start_at=T0)
    changelist = reverse("admin:takt_jobs_job_changelist")
    selected = {"action": "backfill", "_selected_action": [job.pk]}

    asked = admin_client.post(changelist, selected)
    assert asked.status_code == 200 and b"Backfill a past range" in asked.content

    bad = admin_client.post(
        changelist,
        {**selected, "apply": "1", "start": "2025-03-29 15:00", "end": "2025-03-29 12:00"},
    )
    assert b"must not be before the start" in bad.content
    future = admin_client.post(
        changelist,
        {**selected, "apply": "1", "start": "2025-03-29 13:00", "end": "2999-01-01 00:00"},
    )
    assert b"2999-01-01 00:00 CET is in the future" in future.content  # the zone it was read in
    assert not job.runs.exists()

    done = admin_client.post(
        changelist,
        {**selected, "apply": "1", "start": "2025-03-29 13:00", "end": "2025-03-29 15:30"},
        follow=True,
    )
    # F-93: it runs as an operation, whose run page the admin shows.
    operation = Run.objects.get(job__key="takt.operations")
    assert done.redirect_chain == [
        (reverse("admin:takt_runs_run_change", args=[operation.pk]), 302)
    ]
    assert execute(operation.pk, worker="test") == RunStatus.SUCCEEDED
    operation.refresh_from_db()
    assert "3 fire time(s), 0 already had a run, 3 run(s) created" in operation.output
    assert job.runs.filter(trigger=RunTrigger.CATCHUP).count() == 3  # 12, 13, 14 UTC (Berlin +1)


def test_pause_and_resume_actions_record_who_paused(admin_client):
    job = make_job("pausable")
    trigger = hourly(job, created_at=T0)
    changelist = reverse("admin:takt_jobs_job_changelist")
    admin_client.post(changelist, {"action": "pause", "_selected_action": [job.pk]})
    job.refresh_from_db()
    trigger.refresh_from_db()
    assert job.paused and job.paused_by == "admin" and not trigger.active
    assert job.pause_note == "paused in the admin by admin"
    admin_client.post(changelist, {"action": "resume", "_selected_action": [job.pk]})
    job.refresh_from_db()
    trigger.refresh_from_db()
    assert not job.paused and trigger.active


def test_the_job_editor_says_why_a_job_did_not_run(admin_client):
    job = make_job("idle", enabled=False)
    page = admin_client.get(reverse("admin:takt_jobs_job_change", args=[job.pk]))
    assert b"Why didn&#x27;t it run?" in page.content or b"Why didn't it run?" in page.content
    assert b"held back by: enabled (the job is disabled; Run now still works)" in page.content


def test_a_new_trigger_form_starts_with_every_weekday_ticked(admin_client):
    """ "Add another Trigger" clones the empty form: with no day ticked, a
    valid trigger would be refused with "choose at least one weekday"."""
    html = admin_client.get(reverse("admin:takt_jobs_job_add")).content.decode()
    boxes = [line for line in html.split("<input") if 'name="triggers-__prefix__-weekdays"' in line]
    assert len(boxes) == 7
    assert all("checked" in box for box in boxes)


def test_a_once_trigger_posted_without_weekdays_is_saved(admin_client):
    """The weekday boxes are hidden for a once trigger; none ticked is no error."""
    job = make_job("once-job")
    with time_machine.travel(T0, tick=False):
        row = trigger_row(
            job, kind="once", run_at_0="2025-04-01", run_at_1="08:00:00", weekdays__shown="1"
        )
        response = admin_client.post(change_url(job), job_form(job, row))
    assert response.status_code == 302, response.context["inline_admin_formsets"][0].formset.errors
    trigger = job.triggers.get()
    assert trigger.kind == "once" and trigger.weekdays == "0123456"
