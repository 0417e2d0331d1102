"""Check schedule as you type (F-19, F-91): on Add job, an operator types a
cron expression key by key and sees its words and next five fire times in
the trigger's zone and in New York time before saving; a wrong expression
is refused beside the field until fixed; then saves, presses Run now and
watches the run end in the job editor's live panel, without a reload
(F-93), and on the run's page (F-51)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from playwright.sync_api import Locator, Page, expect

from jobs.models import Job
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.pages import (
    JOB_ADD,
    Shot,
    add_trigger,
    expect_saved,
    field_errors,
    fill_job,
    job_row,
    message,
    save,
    shown_value,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRIGGER_ZONE = "Europe/Berlin"
# Monday to Friday: never on a Sunday, when the clocks change in Europe and
# in America, so the library's DST rules and Takt's cannot differ here.
EXPRESSION = "30 2 * * 1-5"
TYPING_DELAY_MS = 40  # between keys, as a quick typist


def fire_times(expression: str, zone: str, count: int = 5) -> list[datetime]:
    """The next `count` fire times after now, by the cronsim library."""
    start = datetime.now(UTC).astimezone(ZoneInfo(zone))
    it = CronSim(expression, start)
    return [next(it) for _ in range(count)]


def shown(moment: datetime, zone: str) -> str:
    """`moment` as the preview shows it in `zone`: "2026-12-02 02:30:00 CET"."""
    local = moment.astimezone(ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def preview_rows(trigger: Locator) -> Locator:
    return trigger.locator(".takt-preview table.takt-preview-times tbody tr")


def test_the_schedule_is_checked_as_the_operator_types_then_saved_and_run(
    page: Page, worker: object, shot: Shot
) -> None:
    page.goto(JOB_ADD)
    fill_job(page, name="Weekday report", target="tests.echo")
    trigger = add_trigger(page)
    trigger.get_by_label("Timezone").fill(TRIGGER_ZONE)
    cron = trigger.get_by_label("Cron expression")
    errors = field_errors(trigger, "cron_expression")

    cron.press_sequentially(EXPRESSION, delay=TYPING_DELAY_MS)

    preview = trigger.locator(".takt-preview")
    expect(preview.locator(".takt-preview-words")).to_have_text(
        "At 02:30, Monday through Friday (Europe/Berlin)"
    )
    expect(preview.locator("thead th")).to_have_text(
        ["Next fire times", f"in {TRIGGER_ZONE}", f"in your zone ({BROWSER_TIME_ZONE})"]
    )
    expected = fire_times(EXPRESSION, TRIGGER_ZONE)
    expect(preview_rows(trigger)).to_have_text(
        [
            re.compile(
                rf"^{n}\s*{re.escape(shown(t, TRIGGER_ZONE))}\s*"
                rf"{re.escape(shown(t, BROWSER_TIME_ZONE))}$"
            )
            for n, t in enumerate(expected, start=1)
        ]
    )
    assert all(shown(t, BROWSER_TIME_ZONE).endswith((" EST", " EDT")) for t in expected)
    expect(errors).to_have_count(0)
    shot(page, "job-editor-preview", element=trigger)

    cron.fill("")
    cron.press_sequentially("61 * * * *", delay=TYPING_DELAY_MS)

    expect(errors).to_have_text("minute: 61 is out of range 0-59")
    expect(preview_rows(trigger)).to_have_count(0)
    expect(page.get_by_role("heading", name="Add job")).to_be_visible()  # nothing was sent
    assert not Job.objects.exists()
    shot(page, "job-editor-preview-error", element=trigger)

    cron.press("Home")
    cron.press("Delete")
    cron.press("Delete")
    cron.press_sequentially("15", delay=TYPING_DELAY_MS)

    expect(errors).to_have_count(0)
    expect(preview.locator(".takt-preview-words")).to_have_text(
        "At 15 minutes past the hour (Europe/Berlin)"
    )
    expect(preview_rows(trigger)).to_have_count(5)

    save(page)

    expect_saved(page, "Weekday report")
    expect(job_row(page, "Weekday report")).to_contain_text(
        "At 15 minutes past the hour (Europe/Berlin)"
    )
    job = Job.objects.get(name="Weekday report")
    assert [(t.cron_expression, t.timezone) for t in job.triggers.all()] == [
        ("15 * * * *", TRIGGER_ZONE)
    ]

    page.get_by_role("link", name="Weekday report", exact=True).click()
    saved = page.locator(".inline-related.has_original")
    expect(saved.locator(".takt-preview-words")).to_have_text(
        "At 15 minutes past the hour (Europe/Berlin)"
    )
    expect(saved.locator(".takt-preview tbody tr")).to_have_count(5)
    shot(page, "job-editor", between=(page.locator("#job_form fieldset").first, saved))
    page.get_by_role("button", name="Run now").click()

    expect(message(page)).to_have_text(re.compile(r"^Run #\d+ queued\."))
    run_id = int(re.findall(r"\d+", message(page).inner_text())[0])
    page.evaluate("window.takt_test_same_page = true")
    latest = page.locator("#takt-latest-run")
    expect(latest.get_by_role("heading")).to_have_text(f"Latest run: #{run_id} (manual)")
    live = latest.locator(".takt-live")
    expect(live).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(live.locator("[data-live=status]")).to_have_text("succeeded")
    expect(live.locator("[data-live=output]")).to_contain_text("hello from Weekday report")
    expect(live.locator("[data-live=output]")).to_contain_text("trigger=manual")
    assert page.evaluate("window.takt_test_same_page") is True, "the page was reloaded"
    shot(page, "job-editor-latest-run", element=latest)

    latest.get_by_role("link", name=f"#{run_id}").click()

    expect(page).to_have_url(re.compile(rf"/admin/takt_runs/run/{run_id}/change/$"))
    expect(shown_value(page, "status_badge")).to_have_text("succeeded")
    expect(page.locator("#takt-run-live [data-live=output]")).to_contain_text(
        "hello from Weekday report"
    )
