"""The job list and the run list fit a 1280-pixel window without sideways
scrolling (issue 29, A.5), with realistic data: long job names and targets,
schedules in words with a window and weekdays, groups, a failed last run
with its duration, a running run on a worker with a long host name, a job
declared in code; in English and in German (whose words are
longer), with the admin's navigation sidebar open as it is by default."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from jobs.models import ConcurrencyGroup, Job, Trigger
from runs.models import Run
from tests.browser.history import past_run
from tests.browser.pages import JOB_LIST, RUN_LIST, times_localized

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTH = 1280  # conftest's viewport


def a_busy_installation() -> None:
    now = timezone.now()
    database = ConcurrencyGroup.objects.create(name="Database maintenance", colour="#d94f00")
    names = [
        ("Nightly invoice reconciliation for all subsidiaries", "billing.tasks.reconcile_invoices"),
        ("Warehouse stock snapshot export to the data lake", "warehouse.exports.stock_snapshot"),
        ("Customer churn model retraining", "analytics.models.retrain_churn_prediction_model"),
        ("Purge expired sessions", "takt.cleanup"),
    ]
    for n, (name, target) in enumerate(names):
        job = Job.objects.create(name=name, target=target, concurrency_group=database,
                                 heartbeat_deadline_s=3600, code_managed=n == 1)  # fmt: skip
        Trigger.objects.create(job=job, kind="cron", cron_expression="*/15 8-18 * * 1-5",
                               timezone="America/Los_Angeles", window_start=time(8),
                               window_end=time(18))  # fmt: skip
        past_run(job, started_at=now - timedelta(minutes=40 + n), duration_s=3725.5,
                 status="failed" if n % 2 else "succeeded",
                 message="the upstream API answered 503 Service Unavailable " * 3)  # fmt: skip
    running = past_run(job, started_at=now - timedelta(minutes=2), status="running")
    Run.objects.filter(pk=running.pk).update(worker="celery@worker-eu-central-1-prod-07.internal")


def fits(page: Page, url: str) -> None:
    page.goto(url)
    times_localized(page)
    expect(page.locator("#result_list tbody tr").first).to_be_visible()
    assert page.locator("#nav-sidebar").is_visible()  # the sidebar open, as by default
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{url} is {width} px wide"
    # Nor does the table scroll inside its box (Django's .results scrolls sideways).
    table = page.evaluate(
        "(() => { const box = document.querySelector('#changelist .results');"
        " return [box.scrollWidth, box.clientWidth]; })()"
    )
    assert table[0] <= table[1], f"{url}: the table is {table[0]} px in a {table[1]} px box"


@pytest.mark.parametrize("url", [JOB_LIST, RUN_LIST])
def test_the_lists_fit_1280_pixels_in_english(page: Page, url: str) -> None:
    a_busy_installation()
    fits(page, url)


@pytest.mark.parametrize("url", [JOB_LIST, RUN_LIST])
def test_the_lists_fit_1280_pixels_in_german(german_page: Page, url: str) -> None:
    a_busy_installation()
    fits(german_page, url)
