"""Times in the admin as an operator in New York sees them, from a server
in UTC: in the browser's zone with its abbreviation (F-90; the shared
display of jobs/display.py and takt/admin.js)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job, Trigger
from runs.models import Run

from .conftest import BROWSER_TIME_ZONE
from .pages import JOB_LIST, job_change_url, job_row, run_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Once a page has loaded its scripts have run: a wrong time will not change.
SHORT_MS = 2_000


def in_browser_zone(moment: datetime) -> str:
    """`moment` to the minute in the browser's zone ("2026-01-15 07:00"), as
    takt/admin.js starts it (the seconds and the zone's name follow)."""
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    return f"{local:%Y-%m-%d %H:%M}"


def zone_name(moment: datetime) -> str:
    return moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE)).tzname() or ""


def test_the_job_list_shows_the_next_run_in_the_browsers_zone(page: Page) -> None:
    job = Job.objects.create(name="Noon", target="takt.hello_world")
    trigger = Trigger.objects.create(
        job=job, kind="cron", cron_expression="0 12 * * *", timezone="UTC"
    )
    assert trigger.next_run_at is not None

    page.goto(JOB_LIST)

    cell = job_row(page, "Noon").locator("td.field-next_run")
    expect(cell).to_contain_text(in_browser_zone(trigger.next_run_at), timeout=SHORT_MS)
    expect(cell).to_contain_text(zone_name(trigger.next_run_at), timeout=SHORT_MS)


def test_the_run_history_shows_its_times_in_the_browsers_zone(page: Page) -> None:
    job = Job.objects.create(name="Past", target="takt.hello_world")
    started_at = datetime(2026, 1, 15, 12, 0, 5, tzinfo=UTC)  # 07:00:05 EST
    Run.objects.create(
        job=job,
        trigger="manual",
        status="succeeded",
        scheduled_for=started_at,
        enqueued_at=started_at,
        started_at=started_at,
        finished_at=started_at,
        duration_s=0.2,
    )

    page.goto(job_change_url(job.pk))

    row = run_history(page).first
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text(f"{in_browser_zone(started_at)}:05 EST", timeout=SHORT_MS)
