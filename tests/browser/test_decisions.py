"""The decision log in the admin (F-65, issue 29 B.7): a job's editor lists
its latest decisions under "Why didn't it run?", newest first, with their
times (and the times inside their details) in the browser's zone
(America/New_York; the server runs in UTC); the list of every job's
decisions filters by kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from jobs.services import pause_job
from runs.decisions import Decision, record
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.pages import Shot, cell_texts, job_change_url, times_localized

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AT = datetime(2031, 1, 15, 12, 0, tzinfo=UTC)  # a winter's day: 07:00 EST
SECOND = timedelta(seconds=1)
LIST_URL = "/admin/takt_runs/schedulerdecision/"


def in_new_york(moment: datetime) -> str:
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def a_job_with_decisions() -> Job:
    job = Job.objects.create(name="Nightly report", target="tests.echo")
    other = Job.objects.create(name="Import", target="tests.echo")
    pause_job(job.pk, note="vendor outage", by="admin", now=AT)
    record(
        [
            Decision("due", job.pk, None, None, f"schedule run for {AT.isoformat()}", AT),
            Decision(
                "not_due",
                job.pk,
                None,
                None,
                f"the job is paused (by admin at {AT.isoformat()}: vendor outage): its due"
                f" time {(AT + 60 * SECOND).isoformat()} waits until it is resumed",
                AT + 60 * SECOND,
            ),
            Decision("not_due", other.pk, None, None, "the queue is paused", AT + 61 * SECOND),
            Decision("beat", 0, None, None, "beat started on host-a (pid 7): scheduling on", AT),
        ]
    )
    return job


def test_the_job_editor_lists_its_decisions_in_the_browsers_zone(page: Page, shot: Shot) -> None:
    job = a_job_with_decisions()

    page.goto(job_change_url(job.pk))

    panel = page.locator("#takt-decisions")
    times_localized(page)
    rows = panel.locator("tr.takt-decision")
    expect(rows).to_have_count(2)
    cells = cell_texts(rows)
    assert [row[:2] for row in cells] == [
        [in_new_york(AT + 60 * SECOND), "not_due"],
        [in_new_york(AT), "due"],
    ]
    assert cells[0][3] == (
        f"the job is paused (by admin at {in_new_york(AT)}: vendor outage): its due time"
        f" {in_new_york(AT + 60 * SECOND)} waits until it is resumed"
    )
    shot(page, "job-editor-decisions", element=panel)
    panel.get_by_role("link", name="All decisions about this job").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(2)


def test_the_list_of_every_jobs_decisions_filters_by_kind(page: Page, shot: Shot) -> None:
    a_job_with_decisions()

    page.goto(LIST_URL)
    expect(page.locator("#result_list tbody tr")).to_have_count(4)
    page.locator("#changelist-filter").get_by_role("link", name="not_due", exact=True).click()

    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(2)
    times_localized(page)
    cells = cell_texts(rows)
    assert [row[:3] for row in cells] == [
        [in_new_york(AT + 61 * SECOND), "not_due", "Import"],
        [in_new_york(AT + 60 * SECOND), "not_due", "Nightly report"],
    ]
    shot(page, "decision-list")
