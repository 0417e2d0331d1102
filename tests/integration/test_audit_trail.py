"""The audit trail (F-120) on every change path: the admin (the signed-in
user and the note typed under the form), the API (the token's name and
`note`), a management command and the sync of jobs declared in code —
who, when, from where, the fields before and after, and the note; a
refused input leaves no row; the History page and the API read it back."""

from __future__ import annotations

from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.test.utils import override_settings
from django.urls import reverse

from jobs.audit import history_of
from jobs.history import entries_for
from jobs.models import (
    ApiToken,
    ConcurrencyGroup,
    HolidayCalendar,
    Job,
    QueueState,
    ResultVariable,
    Trigger,
)
from tests.integration.api_helpers import TokenClient, make_token, user_with
from tests.integration.conftest import make_job
from tests.integration.test_admin import T0, change_url, job_form, trigger_row
from tests.integration.test_config_as_code import NIGHTLY

pytestmark = pytest.mark.django_db


def rows(model, **filters) -> list:
    return list(history_of(model).objects.filter(**filters).order_by("history_id"))


def test_a_trigger_changed_in_the_admin_is_recorded_with_who_when_the_note_and_its_fields(
    admin_client, admin_user
):
    job = make_job("nightly")
    trigger = Trigger.objects.create(
        job=job, kind="cron", cron_expression="0 3 * * *", timezone="UTC"
    )
    data = job_form(
        job,
        trigger_row(job, trigger, cron_expression="30 4 * * *"),
        initial=1,
        _audit_note="later, after the backup",
    )

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 302, response.context and response.context["errors"]
    created, changed = rows(Trigger, id=trigger.pk)
    assert (created.history_type, created.audit_source) == ("+", "code")
    assert (changed.history_type, changed.audit_source, changed.audit_by) == ("~", "admin", "admin")
    assert changed.history_user == admin_user
    assert changed.history_date == T0
    assert changed.history_change_reason == "later, after the backup"
    assert (created.cron_expression, changed.cron_expression) == ("0 3 * * *", "30 4 * * *")
    job_row = rows(Job, id=job.pk)[-1]
    assert (job_row.audit_source, job_row.history_change_reason) == (
        "admin",
        "later, after the backup",
    )

    page = admin_client.get(reverse("admin:takt_jobs_job_history", args=[job.pk]))
    text = page.content.decode()
    assert page.status_code == 200
    assert "later, after the backup" in text
    assert "0 3 * * *" in text and "30 4 * * *" in text


def test_a_refused_admin_change_stores_nothing_and_no_history(admin_client):
    job = make_job("nightly")
    before = len(rows(Job)) + len(rows(Trigger))
    data = job_form(job, trigger_row(job, cron_expression="61 * * * *"), _audit_note="oops")

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 200
    assert len(rows(Job)) + len(rows(Trigger)) == before
    assert not job.triggers.exists()


def test_an_api_change_records_the_tokens_name_and_the_note():
    user = user_with("takt_jobs.change_job", "takt_jobs.view_job")
    api = TokenClient(make_token(user=user, name="deploy bot"))
    job = make_job("nightly", priority=0)

    response = api.send("patch", f"/api/v1/jobs/{job.pk}", {"priority": 5, "note": "ticket 12"})

    assert response.status_code == 200, response.json()
    assert "note" not in response.json()
    last = rows(Job, id=job.pk)[-1]
    assert (last.audit_source, last.audit_by, last.history_user) == (
        "api",
        "operator (API token deploy bot)",
        user,
    )
    assert (last.priority, last.history_change_reason) == (5, "ticket 12")
    assert rows(Job, id=job.pk)[-2].priority == 0


def test_a_refused_api_change_stores_nothing_and_no_history():
    user = user_with("takt_jobs.change_job", "takt_jobs.view_job")
    api = TokenClient(make_token(user=user, name="deploy bot"))
    job = make_job("nightly", priority=0)
    before = len(rows(Job, id=job.pk))

    response = api.send("patch", f"/api/v1/jobs/{job.pk}", {"priority": 5, "enabld": False})

    assert response.status_code == 400
    assert len(rows(Job, id=job.pk)) == before
    assert Job.objects.get(pk=job.pk).priority == 0


def test_a_group_created_and_deleted_through_the_api_keeps_its_history():
    user = user_with(
        "takt_jobs.add_concurrencygroup",
        "takt_jobs.delete_concurrencygroup",
        "takt_jobs.view_concurrencygroup",
    )
    api = TokenClient(make_token(user=user, name="ops"))

    made = api.send("post", "/api/v1/groups", {"name": "db", "limit": 2, "note": "new database"})
    assert made.status_code == 201, made.json()
    group_id = made.json()["id"]
    assert api.send("delete", f"/api/v1/groups/{group_id}").status_code == 204

    created, deleted = rows(ConcurrencyGroup, id=group_id)
    assert (created.history_type, created.limit, created.history_change_reason) == (
        "+",
        2,
        "new database",
    )
    assert (deleted.history_type, deleted.audit_by) == ("-", "operator (API token ops)")
    assert not ConcurrencyGroup.objects.filter(pk=group_id).exists()

    answer = api.get(f"/api/v1/history/groups/{group_id}").json()
    assert [e["action"] for e in answer["results"]] == ["delete", "create"]
    assert answer["results"][1]["note"] == "new database"
    assert {"field": "limit", "before": None, "after": 2, "diff": ""} in answer["results"][1][
        "changes"
    ]


def test_the_history_endpoint_refuses_an_unknown_parameter_and_a_job_token():
    user = user_with("takt_jobs.view_job")
    job = make_job("nightly")
    api = TokenClient(make_token(user=user, name="reader"))

    refused = api.get(f"/api/v1/history/jobs/{job.pk}", limt="5")
    assert refused.status_code == 400
    assert "limt" in refused.json()
    assert api.get(f"/api/v1/history/jobs/{job.pk}", limit="5").status_code == 200
    assert api.get(f"/api/v1/history/spaceships/{job.pk}").status_code == 404
    scoped = TokenClient(make_token(job=job, name="scoped"))
    assert scoped.get(f"/api/v1/history/jobs/{job.pk}").status_code in (401, 403)


def test_pausing_the_queue_by_command_is_recorded_with_the_command_and_the_note():
    call_command("pause_queue", "--note", "db upgrade", stdout=StringIO())
    call_command("maintenance_mode", "on", stdout=StringIO())

    paused, maintenance = [r for r in rows(QueueState, id=1) if r.history_type == "~"]
    assert paused.audit_source == "command"
    assert paused.audit_by.startswith("manage.py pause_queue (")
    assert (paused.paused, paused.history_change_reason) == (True, "db upgrade")
    assert maintenance.audit_by.startswith("manage.py maintenance_mode (")
    assert (maintenance.paused, maintenance.maintenance) == (True, True)


def test_a_token_made_by_command_is_recorded_without_its_secret():
    user_with(username="alice")
    call_command("create_api_token", "--name", "from host-b", "--user", "alice", stdout=StringIO())

    token = ApiToken.objects.get(name="from host-b")
    (made,) = rows(ApiToken, id=token.pk)
    assert (made.history_type, made.audit_source, made.name) == ("+", "command", "from host-b")
    assert not hasattr(made, "token_hash")


def test_the_sync_of_declared_jobs_is_recorded_as_the_sync():
    with time_machine.travel(T0, tick=False), override_settings(TAKT_JOBS={"nightly": NIGHTLY}):
        call_command("sync_jobs", stdout=StringIO())
    job = Job.objects.get(key="nightly")

    (made,) = rows(Job, id=job.pk)
    assert (made.history_type, made.audit_source, made.history_date) == ("+", "sync", T0)
    assert made.audit_by.startswith("sync_jobs (manage.py sync_jobs (")
    (trigger,) = rows(Trigger, job_id=job.pk)
    assert (trigger.audit_source, trigger.cron_expression) == ("sync", "0 3 * * *")

    with (
        time_machine.travel(T0, tick=False),
        override_settings(TAKT_JOBS={"nightly": {**NIGHTLY, "priority": 1}}),
    ):
        call_command("sync_jobs", stdout=StringIO())
    changed = rows(Job, id=job.pk)[-1]
    assert (changed.history_type, changed.audit_source, changed.priority) == ("~", "sync", 1)


def test_the_queue_paused_on_its_admin_page_is_in_its_history_with_the_pause_note(
    admin_client, admin_user
):
    response = admin_client.post(
        "/admin/takt_jobs/queuestate/", {"action": "pause", "note": "db upgrade", "until": ""}
    )
    assert response.status_code == 302

    paused = rows(QueueState, id=1)[-1]
    assert (paused.audit_source, paused.history_user, paused.paused) == ("admin", admin_user, True)
    assert paused.history_change_reason == "db upgrade"
    page = admin_client.get(reverse("admin:takt_jobs_queuestate_history", args=[1]))
    assert page.status_code == 200
    assert "db upgrade" in page.content.decode()


def test_a_form_saved_unchanged_adds_no_entry_to_the_history(admin_client):
    job = make_job("nightly")
    data = job_form(job)

    with time_machine.travel(T0, tick=False):
        assert admin_client.post(change_url(job), data).status_code == 302

    assert [e.action for e in entries_for(Job, job.pk)] == ["create"]


def test_a_scripts_change_is_in_the_history_with_its_unified_diff():
    job = make_job("clean", kind="script", target="", script="print('a')\n")
    job.script = "print('b')\n"
    job.save()

    (change,) = entries_for(Job, job.pk)[0].changes
    assert (change.field, change.before, change.after) == ("script", "print('a')\n", "print('b')\n")
    assert "-print('a')\n+print('b')\n" in change.diff


def test_a_variable_set_by_hand_through_the_api_is_recorded_with_its_value():
    user = user_with("takt_jobs.change_resultvariable", "takt_jobs.view_resultvariable")
    api = TokenClient(make_token(user=user, name="ops"))
    variable = ResultVariable.objects.create(name="export_ok")

    response = api.send(
        "patch", f"/api/v1/variables/{variable.pk}", {"value": 0, "note": "re-run by hand"}
    )

    assert response.status_code == 200, response.json()
    last = rows(ResultVariable, id=variable.pk)[-1]
    assert (last.value, last.audit_source, last.audit_by, last.history_change_reason) == (
        0,
        "api",
        "operator (API token ops)",
        "re-run by hand",
    )


def test_a_calendar_added_in_the_admin_is_recorded_with_the_note(admin_client, admin_user):
    response = admin_client.post(
        reverse("admin:takt_jobs_holidaycalendar_add"),
        {"name": "Plant", "country": "DE", "subdivision": "", "description": "",
         "extra_dates": "", "_audit_note": "for the plant's shutdowns"},
    )  # fmt: skip

    assert response.status_code == 302, response.context and response.context["errors"]
    calendar = HolidayCalendar.objects.get(name="Plant")
    (made,) = rows(HolidayCalendar, id=calendar.pk)
    assert (made.history_type, made.audit_source, made.history_user, made.country) == (
        "+",
        "admin",
        admin_user,
        "DE",
    )
    assert made.history_change_reason == "for the plant's shutdowns"


def test_a_job_paused_through_the_api_and_disabled_by_admin_action_is_recorded(
    admin_client, admin_user
):
    user = user_with("takt_jobs.change_job", "takt_jobs.view_job")
    api = TokenClient(make_token(user=user, name="ops"))
    job = make_job("nightly")

    paused = api.send("post", f"/api/v1/jobs/{job.pk}/pause", {"note": "upstream down"})
    assert paused.status_code == 200, paused.json()
    response = admin_client.post(
        reverse("admin:takt_jobs_job_changelist"),
        {"action": "disable", "_selected_action": [job.pk]},
    )
    assert response.status_code == 302

    created, pause, disable = rows(Job, id=job.pk)
    assert (pause.paused, pause.audit_source, pause.audit_by) == (
        True,
        "api",
        "operator (API token ops)",
    )
    assert pause.history_change_reason == "upstream down"
    assert (disable.enabled, disable.audit_source, disable.history_user) == (
        False,
        "admin",
        admin_user,
    )


def test_tokens_revoked_by_admin_action_are_recorded(admin_client, admin_user):
    make_token(user=admin_user, name="old")
    token = ApiToken.objects.get(name="old")

    response = admin_client.post(
        reverse("admin:takt_jobs_apitoken_changelist"),
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    assert response.status_code == 302
    revoked = rows(ApiToken, id=token.pk)[-1]
    assert (revoked.revoked, revoked.audit_source, revoked.audit_by) == (True, "admin", "admin")


def test_what_was_stored_before_the_trail_has_its_state_then_as_the_first_entry(admin_client):
    hello = Job.objects.get(target="takt.hello_world", name="Hello world")
    (baseline,) = rows(Job, id=hello.pk)
    assert (baseline.audit_by, baseline.name, baseline.enabled) == (
        "migration: the state when the audit trail began",
        "Hello world",
        False,
    )

    hello.description = "greets"
    hello.save()

    (change, first) = [e for e in entries_for(Job, hello.pk) if e.model == "job"]
    assert first.by == "migration: the state when the audit trail began"
    assert [(c.field, c.after) for c in change.changes] == [("description", "greets")]
