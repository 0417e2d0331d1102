"""The trigger forms on the Add job page, as an operator fills them in a
real browser (F-10..F-14, F-91, §11): interval and calendar triggers, a
once time in the past refused at its field and then fixed, a wrong cron
expression refused at its field, and only the fields of the chosen kind
shown (jobs/static/jobs/trigger_inline.js). Dependencies:
test_dependencies.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Locator, Page, expect

from jobs.models import Job, Trigger
from tests.browser.pages import (
    JOB_ADD,
    Shot,
    add_trigger,
    expect_saved,
    field_errors,
    fill_datetime,
    fill_job,
    job_change_url,
    job_row,
    new_triggers,
    save,
    typed,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def choose_kind(trigger: Locator, label: str) -> None:
    trigger.get_by_label("Kind").select_option(label=label)


def test_interval_and_calendar_triggers_are_saved_from_the_add_job_page(
    page: Page, shot: Shot
) -> None:
    page.goto(JOB_ADD)
    fill_job(page, name="Ledger")
    interval = add_trigger(page)
    choose_kind(interval, "Interval")
    interval.get_by_label("Interval seconds").fill("90")
    calendar = add_trigger(page)
    choose_kind(calendar, "Calendar preset")
    calendar.get_by_label("Calendar rule").select_option(label="Last day of each month")
    calendar.get_by_label("Time of day").fill("18:30")
    calendar.get_by_label("Timezone").fill("Europe/Berlin")
    # Each one's check schedule follows what was typed into it.
    expect(interval.locator(".takt-preview-words")).to_have_text("every 1 minute, 30 seconds")
    expect(calendar.locator(".takt-preview-words")).to_have_text(
        "on the last day of each month at 18:30 (Europe/Berlin)"
    )
    shot(page, "job-add-interval-calendar", element=page.locator("#triggers-group"))

    save(page)

    expect_saved(page, "Ledger")
    expect(job_row(page, "Ledger")).to_contain_text(
        "every 1 minute, 30 seconds; on the last day of each month at 18:30 (Europe/Berlin)"
    )
    triggers = Job.objects.get(name="Ledger").triggers.order_by("pk")
    assert [(t.kind, t.interval_seconds, t.calendar_rule) for t in triggers] == [
        ("interval", 90, ""),
        ("calendar", None, "month_end"),
    ]
    assert all(t.next_run_at is not None for t in triggers)


def test_a_once_time_in_the_past_is_refused_at_its_field_until_fixed(
    page: Page, shot: Shot
) -> None:
    # The date and time widgets take the browser's zone (New York; the
    # server is in UTC). The seconds are not 0, so the messages show them
    # ("07:34:30 EST").
    yesterday = datetime.now(UTC).replace(second=30, microsecond=0) - timedelta(days=1)
    page.goto(JOB_ADD)
    fill_job(page, name="One-off")
    trigger = add_trigger(page)
    choose_kind(trigger, "Once")
    fill_datetime(trigger, "Run at", yesterday)

    save(page)

    form = new_triggers(page).first
    expect(field_errors(form, "run_at")).to_have_text(
        f"{typed(yesterday, '%Y-%m-%d %H:%M:%S %Z')} is in the past"
    )
    expect(page.get_by_role("heading", name="Add job")).to_be_visible()
    expect(form.get_by_label("Kind")).to_have_value("once")
    expect(form.get_by_label("Cron expression")).to_be_hidden()  # still the once fields only
    assert not Job.objects.exists()
    shot(page, "trigger-once-in-the-past", element=form)

    tomorrow = yesterday + timedelta(days=2)
    fill_datetime(form, "Run at", tomorrow)
    save(page)

    expect_saved(page, "One-off")
    expect(job_row(page, "One-off")).to_contain_text(
        f"once at {typed(tomorrow, '%Y-%m-%d %H:%M:%S %Z')}"  # in New York, as typed
    )
    trigger_row = Job.objects.get(name="One-off").triggers.get()
    assert trigger_row.run_at == tomorrow and trigger_row.next_run_at == tomorrow


def test_a_wrong_cron_expression_is_refused_at_its_field(page: Page, shot: Shot) -> None:
    page.goto(JOB_ADD)
    fill_job(page, name="Typo")
    trigger = add_trigger(page)
    trigger.get_by_label("Cron expression").fill("61 * * * *")

    save(page)

    form = new_triggers(page).first
    expect(field_errors(form, "cron_expression")).to_have_text("minute: 61 is out of range 0-59")
    expect(form.get_by_label("Cron expression")).to_have_value("61 * * * *")
    assert not Job.objects.exists()
    shot(page, "trigger-cron-error", element=form)


# The fields each kind shows (by label); every other trigger field is hidden.
RESTRICTIONS = ["Timezone", "Weekdays", "Window start", "Window end", "Exclude calendars"]
CLOCKED = ["Jitter (seconds)"]  # a dependency has no fire time to delay
FIELDS_BY_KIND = {
    "Cron expression": ["Cron expression", *RESTRICTIONS, *CLOCKED],
    "Interval": ["Interval seconds", "Interval anchor", "Start at", *RESTRICTIONS, *CLOCKED],
    "Once": ["Run at", *CLOCKED],
    "Calendar preset": ["Calendar rule", "Time of day", *RESTRICTIONS, *CLOCKED],
    "After another job": ["Upstream job", "When it ends"],
}
KINDS = {
    "Cron expression": "cron",
    "Interval": "interval",
    "Once": "once",
    "Calendar preset": "calendar",
    "After another job": "dependency",
}
REQUIRED_FIRST = {
    "Cron expression": "cron_expression",
    "Interval": "interval_seconds",
    "Once": "run_at",
    "Calendar preset": "calendar_rule",
    "After another job": "upstream_job",
}
ALL_FIELDS = sorted({label for labels in FIELDS_BY_KIND.values() for label in labels})


def visible_labels(trigger: Locator) -> list[str]:
    shown = []
    for label in ALL_FIELDS:
        if trigger.locator("label", has_text=label).first.is_visible():
            shown.append(label)
    return shown


@pytest.mark.parametrize("kind", list(FIELDS_BY_KIND))
def test_the_trigger_form_shows_only_the_fields_of_the_chosen_kind(
    page: Page, shot: Shot, kind: str
) -> None:
    page.goto(JOB_ADD)
    trigger = add_trigger(page)

    choose_kind(trigger, kind)

    assert visible_labels(trigger) == sorted(FIELDS_BY_KIND[kind])
    # Its check schedule asks for what this kind needs first.
    expect(trigger.locator(".takt-preview-note")).to_have_text(
        re.compile(rf"^{REQUIRED_FIRST[kind]}: required for an? {KINDS[kind]} trigger$")
    )
    shot(page, f"trigger-kind-{kind.split()[0].lower()}", element=trigger)


def test_a_calendar_preset_shows_the_day_and_month_only_for_rules_that_use_them(
    page: Page, shot: Shot
) -> None:
    page.goto(JOB_ADD)
    trigger = add_trigger(page)
    choose_kind(trigger, "Calendar preset")
    rule = trigger.get_by_label("Calendar rule")
    day, month = trigger.get_by_label("Day of month"), trigger.get_by_label("Month:", exact=True)
    day_help = trigger.get_by_text("1 to 31; months without that day are skipped.")

    rule.select_option(label="Monthly on a day of the month")
    expect(day).to_be_visible()
    expect(day_help).to_be_visible()
    expect(month).to_be_hidden()

    rule.select_option(label="Yearly on a date")
    expect(day).to_be_visible()
    expect(month).to_be_visible()
    expect(trigger.locator(".takt-preview-note")).to_have_text(
        "at_time: required for a calendar trigger"
    )
    shot(page, "trigger-calendar-date", element=trigger)

    rule.select_option(label="Last day of each month")
    expect(day).to_be_hidden()
    expect(day_help).to_be_hidden()
    expect(month).to_be_hidden()
    expect(trigger.get_by_label("Time of day")).to_be_visible()


def test_a_saved_trigger_opens_with_the_fields_of_its_kind(page: Page) -> None:
    job = Job.objects.create(name="Saved", target="takt.hello_world")
    Trigger.objects.create(job=job, kind="interval", interval_seconds=600)

    page.goto(job_change_url(job.pk))

    trigger = page.locator(".inline-related.has_original")  # a saved trigger's form
    expect(trigger.get_by_label("Interval seconds")).to_have_value("600")
    assert visible_labels(trigger) == sorted(FIELDS_BY_KIND["Interval"])
