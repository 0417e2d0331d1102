"""`/api/v1/schedule/preview` (F-19): a trigger's next fire times and its
schedule in words before it is saved, refused with the field and the
words saving would use; nothing is stored."""

from __future__ import annotations

import pytest
import time_machine
from django.urls import reverse

from jobs.models import HolidayCalendar, Trigger
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

URL = "/api/v1/schedule/preview"
NOW = utc(2026, 3, 27, 12, 0)  # Friday before Berlin springs forward (Sunday 29 March)


def post(client, **body):
    with time_machine.travel(NOW, tick=False):
        return client.post(URL, body, content_type="application/json")


def test_a_cron_expression_previews_its_next_fire_times_across_dst(admin_client):
    answer = post(admin_client, cron_expression="30 2 * * *", timezone="europe/berlin", count=3)
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["description"] == "At 02:30 (Europe/Berlin)"
    assert body["timezone"] == "Europe/Berlin"
    # 28 March 02:30 CET; 29 March 02:30 does not exist: 03:00 CEST (= 01:00 UTC); then 00:30 UTC.
    assert body["fire_times"] == [
        "2026-03-28T01:30:00Z",
        "2026-03-29T01:00:00Z",
        "2026-03-30T00:30:00Z",
    ]


def test_get_takes_the_fields_as_query_parameters(admin_client):
    with time_machine.travel(NOW, tick=False):
        answer = admin_client.get(
            URL, {"kind": "interval", "interval_seconds": "90", "start_at": "2026-03-27T12:00:00Z"}
        )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["fire_times"][:2] == ["2026-03-27T12:01:30Z", "2026-03-27T12:03:00Z"]
    assert answer.json()["description"].startswith("every 1 minute, 30 seconds")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"cron_expression": "61 * * * *"}, "cron_expression", "minute: 61 is out of range 0-59"),
        ({"cron_expression": "0 0 31 4 *"}, "cron_expression", "never fires"),
        (
            {"cron_expression": "* * * * *", "timezone": "Mars/Olympus"},
            "timezone",
            "unknown time zone",
        ),
        (
            {"kind": "interval", "interval_seconds": 0},
            "interval_seconds",
            "between 1 second and 30 days",
        ),
        ({"kind": "once", "run_at": "2026-03-27T11:00:00Z"}, "run_at", "is in the past"),
        (
            {"cron_expression": "0 9 * * *", "weekdays": ""},
            "weekdays",
            "choose at least one weekday",
        ),
        (
            {"cron_expression": "0 9 * * *", "window_start": "10:00", "window_end": "11:00"},
            "window_start",
            "is outside the window 10:00-11:00",
        ),
        ({"cron_expression": "* * * * *", "count": 51}, "count", "less than or equal to 50"),
        (
            {"cron_expression": "* * * * *", "exclude_calendars": ["nope"]},
            "exclude_calendars",
            "nope",
        ),
    ],
)
def test_a_wrong_field_is_named_with_the_words_saving_would_use(admin_client, body, field, message):
    answer = post(admin_client, **body)
    assert answer.status_code == 400
    errors = answer.json()
    assert field in errors, errors
    assert message in " ".join(errors[field]), errors
    assert Trigger.objects.filter(job__target="tests.echo").count() == 0


def test_the_error_is_the_admin_forms_error(admin_client):
    """The same message as saving the trigger in the job editor."""
    from tests.integration.test_admin import change_url, job_form, trigger_row

    job = make_job("nightly")
    with time_machine.travel(NOW, tick=False):
        saved = admin_client.post(
            change_url(job), job_form(job, trigger_row(job, cron_expression="5 25 * * *"))
        )
    form_errors = saved.context["inline_admin_formsets"][0].formset.errors[0]
    preview = post(admin_client, cron_expression="5 25 * * *").json()
    assert preview["cron_expression"] == form_errors["cron_expression"]


def test_a_saved_once_trigger_whose_time_passed_previews_without_an_error(admin_client):
    job = make_job("once")
    trigger = make_trigger(job, created_at=utc(2026, 3, 1), kind="once", run_at=utc(2026, 3, 20, 8))
    answer = post(admin_client, id=trigger.pk, kind="once", run_at="2026-03-20T08:00:00Z")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["fire_times"] == []
    changed = post(admin_client, id=trigger.pk, kind="once", run_at="2026-03-21T08:00:00Z")
    assert "is in the past" in changed.json()["run_at"][0]
    trigger.refresh_from_db()
    assert trigger.run_at == utc(2026, 3, 20, 8)


def test_excluded_calendars_and_weekdays_shape_the_times(admin_client):
    HolidayCalendar.objects.create(name="office", extra_dates="2026-03-30 closed")
    answer = post(
        admin_client,
        cron_expression="0 9 * * *",
        timezone="UTC",
        weekdays="0123",
        exclude_calendars=["office"],
        count=3,
    )
    assert answer.status_code == 200, answer.json()
    assert answer.json()["fire_times"] == [
        "2026-03-31T09:00:00Z",  # Tuesday (Monday 30 March is excluded)
        "2026-04-01T09:00:00Z",
        "2026-04-02T09:00:00Z",
    ]
    assert "except" in answer.json()["description"]


def test_the_preview_needs_a_signed_in_user(client):
    assert post(client, cron_expression="* * * * *").status_code in (401, 403)


def test_the_preview_is_in_the_schema(admin_client):
    schema = admin_client.get(reverse("api-schema"), {"format": "json"}).json()
    assert "/api/v1/schedule/preview/" in schema["paths"]
    assert {"get", "post"} <= set(schema["paths"]["/api/v1/schedule/preview/"])


def test_a_dependency_previews_its_words_and_no_fire_times(admin_client):
    """What the admin's trigger form sends for "After another job" (F-33)."""
    upstream = make_job("import")
    answer = post(
        admin_client,
        kind="dependency",
        upstream_job=upstream.pk,
        upstream_statuses=["succeeded", "failed"],
        cron_expression="",
        timezone="",
    )
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["description"] == f"after job 'import' (#{upstream.pk}) ends succeeded or failed"
    assert body["fire_times"] == []
    missing = post(
        admin_client, kind="dependency", upstream_job=None, upstream_statuses=["succeeded"]
    )
    assert missing.status_code == 400
    assert missing.json() == {"upstream_job": ["required for a dependency trigger"]}
