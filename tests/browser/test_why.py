""" "Why didn't it run?" in the job editor (F-66): the right verdict for
each state that holds a job back, made through the services and the
process heartbeats, with the check that fails marked by a drawn cross (not an emoji) and its times in
the browser's zone; the stuck run it names is cancelled from the panel."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from jobs.models import Job, Trigger
from jobs.services import pause_job, set_jobs_enabled
from runs import queue
from runs.ending import finish_run
from runs.models import Run, RunStatus
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.history import WORKER, past_run, report_beat, report_worker
from tests.browser.pages import Shot, confirm_cancel, job_change_url, message, times_localized

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NIGHTLY = "0 3 * * *"  # in UTC: 22:00 or 23:00 in New York


def in_new_york(moment: datetime) -> str:
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def nightly_job(**fields: object) -> Job:
    job = Job.objects.create(name="Nightly report", target="tests.echo", **fields)
    Trigger.objects.create(job=job, kind="cron", cron_expression=NIGHTLY)
    return job


def healthy() -> Job:
    """A live beat and worker, and an enabled job with an enabled trigger."""
    report_beat()
    report_worker()
    return nightly_job()


def disabled() -> Job:
    report_beat()
    report_worker()
    job = nightly_job()
    set_jobs_enabled([job.pk], False)
    return job


def maintenance() -> Job:
    job = healthy()
    queue.set_maintenance(True, note="upgrading Redis (admin)", now=timezone.now())
    return job


def queue_paused() -> Job:
    job = healthy()
    queue.pause_queue(note="deploying", by="admin", now=timezone.now(), until=LATER)
    return job


def no_live_beat() -> Job:
    report_worker()
    return nightly_job()


def scheduler_off() -> Job:
    report_beat("beat@host-a", scheduler=False)
    report_beat("beat@host-b", scheduler=False)
    report_worker()
    return nightly_job()


def job_paused() -> Job:
    job = healthy()
    pause_job(job.pk, note="vendor outage", by="admin", now=timezone.now(), until=LATER)
    return job


def run_limit_reached() -> Job:
    """A job limited to one run, after its run: it disabled itself."""
    report_beat()
    report_worker()
    job = nightly_job(max_runs=1)
    past_run(job, started_at=timezone.now() - timedelta(minutes=5))
    return job


LATER = datetime(2031, 1, 15, 12, 0, tzinfo=UTC)  # a winter's day: 07:00 EST
STATES: dict[str, tuple[Callable[[], Job], str, str | re.Pattern[str]]] = {
    # state: (how it is made, the check that fails, the verdict)
    "disabled": (
        disabled,
        "enabled",
        "held back by: enabled (the job is disabled; Run now still works)",
    ),
    "maintenance": (
        maintenance,
        "maintenance",
        re.compile(
            re.escape(
                "held back by: maintenance (maintenance mode is on (upgrading Redis (admin)):"
                " target 'tests.echo' is not on the maintenance allow-list (takt.maintenance_off,"
                " takt.pause_queue, takt.remove_lock_file, takt.resume_queue"
            )
            + r"[^)]*"
            + re.escape(
                "), so every start is refused and recorded skipped (manage.py maintenance_mode"
                " off ends it))"
            )
        ),
    ),
    "queue paused": (
        queue_paused,
        "queue",
        f"held back by: queue (the queue is paused: deploying; it resumes by itself at"
        f" {in_new_york(LATER)})",
    ),
    "no live beat": (
        no_live_beat,
        "beat",
        "held back by: beat (no live beat: nothing is dispatched by schedule (start one: celery"
        " -A scheduler_project beat -S runs.beat:TaktScheduler))",
    ),
    "every scheduler off": (
        scheduler_off,
        "scheduler switch",
        "held back by: scheduler switch (every live beat has its scheduler switched off"
        " (TAKT_SCHEDULER_ENABLED=false): beat@host-a, beat@host-b)",
    ),
    "job paused": (
        job_paused,
        "job pause",
        f"held back by: job pause (paused: vendor outage; it resumes by itself at"
        f" {in_new_york(LATER)})",
    ),
    "run limit reached": (
        run_limit_reached,
        "enabled",
        "held back by: enabled (disabled: it reached its run limit of 1 runs (raise or clear the"
        " limit, then enable it))",
    ),
}


@pytest.mark.parametrize("state", list(STATES))
def test_the_verdict_names_what_holds_the_job_back(page: Page, state: str) -> None:
    make, failing, verdict = STATES[state]
    job = make()

    page.goto(job_change_url(job.pk))

    why = page.locator("#takt-why")
    times_localized(page)
    expect(why.locator(".takt-verdict")).to_have_text(verdict)
    expect(why.locator(".takt-check-no td:nth-child(2)").first).to_have_text(failing)
    failed = why.locator(".takt-check-no td:first-child").first
    expect(failed.get_by_role("img", name="Check failed")).to_be_visible()  # drawn, not an emoji
    expect(failed).to_have_text("Check failed")  # its <title>, for readers without the picture
    expect(why.get_by_role("button", name=re.compile("^Cancel run"))).to_have_count(0)


def test_a_healthy_job_says_when_it_runs_next(page: Page, shot: Shot) -> None:
    job = healthy()
    next_run_at = job.triggers.get().next_run_at
    assert next_run_at is not None

    page.goto(job_change_url(job.pk))

    why = page.locator("#takt-why")
    times_localized(page)
    expect(why.locator(".takt-verdict")).to_have_text(
        re.compile(
            rf"^nothing holds it back: it runs next at {re.escape(in_new_york(next_run_at))}"
            r" \(in \d+ (min|h)\)\s*$"
        )
    )
    expect(why.locator(".takt-check-no")).to_have_count(0)
    expect(why.locator(".takt-check td:nth-child(2)")).to_have_text(
        ["enabled", "beat", "scheduler switch", "queue", "maintenance", "job pause", "trigger",
         "weekday and time window", "next fire time", "active runs", "worker", "lock"]
    )  # fmt: skip
    expect(why.locator(".takt-check").filter(has_text="next fire time")).to_contain_text(
        f"at {in_new_york(next_run_at)}"
    )
    shot(page, "job-editor-why-healthy", element=why)


def test_a_stuck_run_is_named_and_cancelled_from_the_panel(page: Page) -> None:
    """A run left running by a worker that is gone (no lock): the panel
    names it, says it is recovered as lost, and offers to cancel it."""
    job = healthy()
    since = timezone.now().replace(microsecond=0) - timedelta(minutes=12)
    stuck = past_run(job, started_at=since, status=RunStatus.RUNNING)

    page.goto(job_change_url(job.pk))

    why = page.locator("#takt-why")
    times_localized(page)
    expect(why.locator(".takt-verdict")).to_contain_text(
        f"held back by: active runs (run #{stuck.pk} is running on {WORKER}; its worker is gone"
        " (its lock lapsed): it is recovered as lost; the next fire time is recorded as"
        f" skipped; running since {in_new_york(since)})"
    )
    why.get_by_role("button", name=f"Cancel run #{stuck.pk}").click()
    confirm_cancel(page, stuck.pk)

    expect(message(page)).to_have_text(f"Run #{stuck.pk} cancelled.")
    expect(why.locator(".takt-verdict")).to_contain_text("nothing holds it back")
    stuck = Run.objects.get(pk=stuck.pk)
    assert (stuck.status, stuck.cancelled_by) == (RunStatus.CANCELLED, "admin")


def test_the_panel_refreshes_when_the_latest_run_ends(page: Page) -> None:
    """Issue 29, A.5: "Why didn't it run?" is drawn again on the Latest run
    panel's signal (its run changed status), without reloading the page."""
    job = healthy()
    run = past_run(job, started_at=timezone.now() - timedelta(seconds=30), status="running")

    page.goto(job_change_url(job.pk))
    why = page.locator("#takt-why")
    times_localized(page)
    expect(why.locator(".takt-verdict")).to_contain_text(
        f"held back by: active runs (run #{run.pk}"
    )
    page.evaluate("window.taktSamePage = true")  # gone if the page were loaded again
    finish_run(run, status=RunStatus.SUCCEEDED, now=timezone.now())

    latest = page.locator("#takt-latest-run .takt-live")
    expect(latest).to_have_attribute("data-status", "succeeded")  # the Latest run panel saw it
    expect(why).to_have_attribute("data-refreshed", "1")  # and the why panel came with it
    expect(why.locator(".takt-verdict")).to_contain_text("nothing holds it back: it runs next at")
    expect(why.get_by_role("button", name=re.compile("^Cancel run"))).to_have_count(0)
    times_localized(page)  # the new panel's times in the browser's zone too
    assert page.evaluate("window.taktSamePage") is True
