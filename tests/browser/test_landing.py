"""The landing page, the admin's index (F-64, F-92, F-90): the heartbeat
states counted, the open alerts, the queue, the next runs and the jobs
whose last run failed, each one click from its page. The state is made
through the services: runs that ended, the overdue check, the process
heartbeats of a beat and a worker."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.models import Heartbeat
from heartbeats.services import check_overdue
from jobs.models import Job, Trigger
from runs.queue import pause_queue, resume_queue
from tests.browser.history import past_run, report_beat, report_worker
from tests.browser.pages import (
    JOB_LIST,
    OPERATIONS,
    QUEUE,
    RUN_LIST,
    Shot,
    cell_texts,
    job_row,
    times_localized,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def a_days_work() -> dict[str, Any]:
    """Four jobs and an outside heartbeat: Ledger up, Invoices down (its run
    failed: an alert), Backup late (overdue: an alert), Cleanup running,
    "nightly-backup" new; a live beat and worker."""
    now = timezone.now()
    jobs = {}
    for name, cron in (("Ledger", "0 6 * * *"), ("Invoices", "30 7 * * 1-5"),
                       ("Backup", "15 * * * *"), ("Cleanup", "*/20 * * * *")):  # fmt: skip
        jobs[name] = Job.objects.create(
            name=name, target="tests.echo", heartbeat_deadline_s=600 if name == "Backup" else None
        )
        Trigger.objects.create(job=jobs[name], kind="cron", cron_expression=cron)
    past_run(jobs["Ledger"], started_at=now - timedelta(minutes=50), duration_s=4.2)
    past_run(
        jobs["Invoices"], started_at=now - timedelta(minutes=35), duration_s=12,
        status="failed", message="the mail server refused the login",
    )  # fmt: skip
    past_run(jobs["Backup"], started_at=now - timedelta(minutes=30), duration_s=95)
    past_run(jobs["Cleanup"], started_at=now - timedelta(minutes=3), status="running")
    Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    check_overdue(now=now)  # what the beat does every 30 s: Backup is past its 10 minutes
    report_beat()
    report_worker()
    return jobs


def test_the_landing_page_counts_the_states_and_links_to_each_page(
    page: Page, a_days_work: dict[str, Any], shot: Shot
) -> None:
    page.goto("/admin/")

    times_localized(page)
    states = cell_texts(page.locator("#takt-landing-states tr"))
    # Up: Ledger, and the beat and the worker (their process heartbeats).
    assert dict(states) == {
        "new": "1",
        "up": "3",
        "late": "1",
        "down": "1",
        "paused": "0",
        "running": "0",
    }
    alerts = page.locator("#takt-landing-alerts")
    expect(alerts).to_contain_text("2 open, 2 unseen")
    expect(alerts.locator("tr")).to_have_text(
        [
            re.compile(r"^warning\s*Run 'Backup' overdue"),
            re.compile(r"^warning\s*Run 'Invoices' failed"),
        ]
    )
    queue = cell_texts(page.locator("#takt-landing-queue tr"))
    assert queue == [
        ["Queue", "running"], ["Maintenance", "off"], ["Beats", "1 live"],
        ["Workers", "1 live (4 runs at once)"], ["Runs", "1 running, 0 queued"],
    ]  # fmt: skip
    next_runs = page.locator("#takt-landing-next tr")
    expect(next_runs).to_have_count(4)
    soonest = min(a_days_work.values(), key=lambda job: job.triggers.get().next_run_at)
    expect(next_runs.first).to_contain_text(soonest.name)
    expect(next_runs.first.locator("time")).to_have_text(
        re.compile(r" E[SD]T \((in \d+ (s|min|h)|\d+ s ago)\)$")
    )
    expect(page.locator("#takt-landing-failed tr")).to_have_text(
        [re.compile(r"^failed\s*Invoices\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T$")]
    )
    shot(page, "landing")

    page.locator("#takt-landing-states").get_by_role("link", name="Operations page →").click()
    expect(page).to_have_url(re.compile(rf"{OPERATIONS}$"))
    expect(page.get_by_role("heading", name="Operations", exact=True)).to_be_visible()
    page.go_back()
    page.locator("#takt-landing-queue").get_by_role("link", name="Queue page →").click()
    expect(page).to_have_url(re.compile(rf"{QUEUE}$"))
    expect(page.locator("#takt-queue-state")).to_have_text("running")
    page.go_back()
    page.locator("#takt-landing-failed").get_by_role("link", name="Invoices").click()
    expect(page).to_have_url(
        re.compile(rf"/admin/takt_jobs/job/{a_days_work['Invoices'].pk}/change/$")
    )
    page.go_back()
    page.locator("#takt-landing-next").get_by_role("link", name=soonest.name).click()
    expect(page.get_by_role("heading", name="Change job")).to_be_visible()
    expect(page.locator("#id_name")).to_have_value(soonest.name)
    page.go_back()
    for link, where in (
        ("Jobs", JOB_LIST),
        ("Runs", RUN_LIST),
        ("Alerts", "/admin/takt_heartbeats/alert/"),
    ):
        page.locator(".takt-links").get_by_role("link", name=link, exact=True).click()
        expect(page).to_have_url(re.compile(rf"{where}$"))
        page.go_back()


def test_the_job_list_and_operations_page_show_the_same_day(
    page: Page, a_days_work: dict[str, Any], shot: Shot
) -> None:
    page.goto(JOB_LIST)

    times_localized(page)
    invoices = job_row(page, "Invoices")
    expect(invoices.locator("td.field-schedule")).to_have_text(
        "At 07:30, Monday through Friday (UTC)"
    )
    expect(invoices.locator("td.field-last_run")).to_contain_text("failed")
    expect(invoices.locator("td.field-heartbeat_state")).to_have_text("down")
    expect(job_row(page, "Backup").locator("td.field-heartbeat_state")).to_have_text("late")
    expect(job_row(page, "Cleanup").locator("td.field-last_run")).to_contain_text("running")
    page.get_by_role("button", name="Toggle navigation").click()  # room for every column
    shot(page, "job-list")

    page.goto(OPERATIONS)

    times_localized(page)
    rows = cell_texts(page.locator("table.takt-ops").first.locator("tbody tr"))
    # Each heartbeat that reported (Cleanup's run has not ended yet), the
    # beat's and the worker's own among them.
    assert {row[0]: row[-1] for row in rows} == {
        "Backup": "late",  # the same words as the job list's (issue 29, A.5)
        "Invoices": "down",
        "Ledger": "up",
        "nightly-backup": "new",
        "beat@host-a": "up",
        "worker:celery@host-a": "up",
    }
    shot(page, "operations")


def test_the_next_runs_say_when_the_queue_is_paused(page: Page) -> None:
    job = Job.objects.create(name="Nightly", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *")
    next_runs = page.locator("#takt-landing-next")
    page.goto("/admin/")
    expect(next_runs.get_by_role("link", name="Nightly")).to_be_visible()
    expect(next_runs.locator("#takt-next-paused")).to_have_count(0)

    pause_queue(note="migration", by="ops", now=timezone.now())
    page.reload()

    expect(next_runs.locator("#takt-next-paused")).to_have_text(
        "The queue is paused: none of these runs starts until it is resumed."
    )
    expect(next_runs.get_by_role("link", name="Nightly")).to_be_visible()
    resume_queue(now=timezone.now())
    page.reload()
    expect(next_runs.locator("#takt-next-paused")).to_have_count(0)
