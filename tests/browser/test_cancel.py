"""Cancelling a running run from the admin (F-50's `cancelled`), with a
real worker and beat: from the run's page ("Cancel run"), after which the
job runs again at its next fire time; and from the job editor's "Why
didn't it run?" (F-66), which names the run that holds the job."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.processes import report_process
from jobs.models import Job, Trigger
from jobs.services import set_jobs_enabled
from runs.ending import finish_run
from runs.models import ACTIVE_STATUSES, Run, RunStatus
from tests.browser.history import past_run
from tests.browser.pages import (
    RUN_LIST,
    Shot,
    confirm_cancel,
    job_change_url,
    message,
    reload_until,
    run_change_url,
    run_history,
    shown_value,
    times_localized,
)
from tests.live_fixtures import wait_until
from tests.processes import Proc

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_START_TIMEOUT_S = 30  # a beat and a worker on a loaded 2-core machine


@pytest.fixture
def worker(start_process: Callable[..., Proc]) -> Iterator[Proc]:
    """A worker of each test's own: a cancel revokes its run's Celery task id
    (takt-run-<id>) in the worker for hours, and each test's run ids start
    again at 1 (the flush restarts them), so a shared worker would discard
    the next test's run #1."""
    proc = start_process("worker")
    yield proc
    proc.stop()


@pytest.fixture
def settle() -> Iterator[Callable[[Job], None]]:
    """settle(job): at the test's end the job is disabled and its active runs
    are waited for, so that no run of it is left for the next test's worker."""
    jobs: list[Job] = []
    yield jobs.append
    for job in jobs:
        set_jobs_enabled([job.pk], False)
        wait_until(
            lambda job=job: not Run.objects.filter(job=job, status__in=ACTIVE_STATUSES).exists(),
            RUN_START_TIMEOUT_S,
            f"the runs of {job.name} to end",
        )


def running_run(job: Job) -> Run:
    return wait_until(
        lambda: Run.objects.filter(job=job, status=RunStatus.RUNNING).first(),
        RUN_START_TIMEOUT_S,
        f"a run of {job.name} to start",
    )


def test_a_running_run_is_cancelled_from_its_page_and_the_job_runs_again(
    page: Page,
    worker: object,
    beat: Callable[..., object],
    settle: Callable[[Job], None],
    shot: Shot,
) -> None:
    job = Job.objects.create(
        name="Long export",
        target="tests.loop_first",  # loops a minute the first time, then returns at once
        params={"key": f"takt-test:{uuid.uuid4().hex}", "seconds": 60},
        overlap_policy="skip",
    )
    Trigger.objects.create(job=job, kind="cron", cron_expression="*/5 * * * * *")
    settle(job)
    beat()
    looping = running_run(job)

    page.goto(run_change_url(looping.pk))
    expect(shown_value(page, "status_badge")).to_have_text("running")
    live = page.locator("#takt-run-live .takt-live")
    expect(live.locator("[data-live=output]")).to_contain_text("execution 1: looping 60 s")
    page.locator("#takt-cancel-run").click()
    confirm_cancel(page, looping.pk)

    expect(message(page)).to_have_text(f"Run #{looping.pk} cancelled.")
    expect(page).to_have_url(re.compile(rf"/admin/takt_runs/run/{looping.pk}/change/$"))
    expect(shown_value(page, "status_badge")).to_have_text("cancelled")
    expect(shown_value(page, "message_text")).to_have_text("cancelled by admin")
    expect(shown_value(page, "cancelled_by")).to_have_text("admin")
    expect(live).to_have_attribute("data-status", "cancelled")
    expect(page.locator("#takt-cancel-run")).to_have_count(0)  # nothing left to cancel
    shot(page, "run-cancelled")
    looping.refresh_from_db()
    assert (looping.status, looping.cancelled_by) == ("cancelled", "admin")

    page.goto(job_change_url(job.pk))
    after = run_history(page).filter(has_text="succeeded")
    reload_until(page, lambda: after.count() > 0, RUN_START_TIMEOUT_S, "the next run to succeed")
    expect(after.first).to_contain_text("schedule")
    following = Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).order_by("pk").first()
    assert following is not None and following.pk > looping.pk
    assert following.scheduled_for > looping.finished_at
    assert "execution 2: done" in following.output


def test_the_run_that_holds_a_job_is_cancelled_from_why_didnt_it_run(
    page: Page, worker: object, settle: Callable[[Job], None], shot: Shot
) -> None:
    job = Job.objects.create(name="Nightly export", target="tests.loop", params={"seconds": 60})
    Trigger.objects.create(job=job, kind="cron", cron_expression="0 3 * * *")
    settle(job)
    report_process("beat@browser-test", now=timezone.now(), detail="scheduler=on")

    page.goto(job_change_url(job.pk))
    page.get_by_role("button", name="Run now").click()
    run_id = int(re.findall(r"\d+", message(page).inner_text())[0])
    why = page.locator("#takt-why")
    verdict = why.locator(".takt-verdict")
    holding = re.compile(
        rf"^held back by: active runs \(run #{run_id} is running on \S+; the next fire time"
        r" is recorded as skipped; running since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T\)"
    )
    # A page drawn in the instant between the run's start and its taking the
    # job's lock says its worker is gone (reported): the next one is right.
    reload_until(
        page, lambda: bool(holding.search(verdict.inner_text())), RUN_START_TIMEOUT_S, "the run"
    )
    expect(why.locator(".takt-check-no")).to_contain_text(["active runs"])
    shot(page, "job-editor-why", element=why)
    why.get_by_role("button", name=f"Cancel run #{run_id}").click()
    confirm_cancel(page, run_id)

    expect(message(page)).to_have_text(f"Run #{run_id} cancelled.")
    expect(page).to_have_url(re.compile(rf"{job_change_url(job.pk)}$"))
    expect(verdict).to_contain_text(re.compile(r"^nothing holds it back: it runs next at "))
    expect(why.get_by_role("button", name=re.compile("^Cancel run"))).to_have_count(0)
    expect(run_history(page).first).to_contain_text("cancelled")
    assert Run.objects.get(pk=run_id).cancelled_by == "admin"


def test_a_run_that_ended_while_its_page_was_open_is_not_cancelled(page: Page) -> None:
    job = Job.objects.create(name="Quick export", target="tests.echo")
    run = past_run(job, started_at=timezone.now() - timedelta(seconds=30), status="running")
    page.goto(run_change_url(run.pk))
    page.locator("#takt-cancel-run").click()
    expect(page.get_by_role("heading", name="Are you sure?")).to_be_visible()
    finish_run(run, status=RunStatus.SUCCEEDED, now=timezone.now())  # it ends meanwhile

    page.get_by_role("button", name="Yes, cancel").click()

    refusal = message(page, "error")
    expect(refusal).to_contain_text(f"Run #{run.pk} already ended succeeded at")
    expect(refusal).to_contain_text("only a queued or running run can be cancelled")
    assert Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED
    times_localized(page)  # its end in the browser's zone, as every time on the page
    expect(refusal).to_contain_text(
        re.compile(r"ended succeeded at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d E[SD]T;")
    )
    assert "UTC" not in refusal.inner_text(), refusal.inner_text()


def test_the_run_lists_cancel_action_asks_first(page: Page, shot: Shot) -> None:
    job = Job.objects.create(name="Bulk export", target="tests.echo")
    waiting = past_run(job, started_at=timezone.now() - timedelta(minutes=1), status="queued")
    done = past_run(job, started_at=timezone.now() - timedelta(minutes=2))
    action = "Cancel the selected queued or running runs"
    rows = page.locator("#result_list tbody tr")

    def cancel_selected(*run_ids: int) -> None:
        for run_id in run_ids:
            rows.filter(has_text=f"#{run_id}").get_by_role("checkbox").check()
        page.get_by_label("Action:").select_option(label=action)
        page.locator("button[name=index]").click()  # Go (the filters have their own)

    page.goto(RUN_LIST)
    cancel_selected(waiting.pk, done.pk)
    expect(page.get_by_role("heading", name="Are you sure?")).to_be_visible()
    expect(page.locator("#takt-cancel-runs")).to_contain_text(f"#{waiting.pk}")
    expect(page.locator("#takt-cancel-ended")).to_contain_text(f"#{done.pk}")  # nothing to do
    times_localized(page)
    shot(page, "run-cancel-confirmation", element=page.locator("#content"))
    page.get_by_role("link", name="No, go back").click()

    expect(page.get_by_role("checkbox").first).to_be_visible()  # the run list again
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.QUEUED
    cancel_selected(waiting.pk)
    confirm_cancel(page, waiting.pk)

    expect(message(page).first).to_have_text(f"Cancelled 1 run(s): #{waiting.pk}.")
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.CANCELLED
