"""Long operations as runs with a live progress panel (F-93), with a real
worker: a backfill started from the job list's action (F-101) whose run
page shows the bar move to 100 % and the output, without a reload; a
job's own progress seen half-way and then to the end; the Import jobs page
(F-74): a pasted YAML document refused at its problem, then its dry-run
plan, then Import and its run."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from playwright.sync_api import Locator, Page, expect

from jobs.models import Job, Trigger
from runs.models import ACTIVE_STATUSES, Run, RunStatus, RunTrigger
from runs.services import enqueue_job
from tests.browser.history import report_worker
from tests.browser.pages import (
    JOB_LIST,
    Shot,
    job_row,
    message,
    run_action,
    run_change_url,
    shown_value,
    typed,
)
from tests.live_fixtures import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_MS = 30_000  # a run on the worker of a loaded 2-core machine
# Each change of the progress bar, as the page showed it: [hidden, value].
RECORD_BAR = """
window.takt_bar = [];
setInterval(() => {
  const bar = document.querySelector("#takt-run-live progress[data-live=bar]");
  if (!bar) return;
  const now = [bar.hidden, bar.getAttribute("value")];
  const last = window.takt_bar[window.takt_bar.length - 1];
  if (!last || last[0] !== now[0] || last[1] !== now[1]) window.takt_bar.push(now);
}, 20);
"""


@pytest.fixture
def quiet_at_the_end() -> Iterator[None]:
    """At the test's end, every run has ended: none is left for the next
    test's worker (whose run ids start again at 1)."""
    yield
    active = Run.objects.filter(status__in=ACTIVE_STATUSES)
    try:
        wait_until(lambda: not active.exists(), RUN_TIMEOUT_MS / 1000, "every run to end")
    except AssertionError:
        left = list(active.values_list("pk", "job__name", "status", "held"))
        raise AssertionError(f"runs left active: {left}") from None


def live_panel(page: Page) -> Locator:
    return page.locator("#takt-run-live .takt-live")


def busy_worker(seconds: float) -> None:
    """Both of the worker's processes asleep for `seconds`: what is started
    next waits, queued, until one is free."""
    sleeper = Job.objects.create(
        name="Sleeper", target="tests.sleep", params={"seconds": seconds},
        overlap_policy="allow", max_instances=2,
    )  # fmt: skip
    runs = [enqueue_job(sleeper, trigger=RunTrigger.MANUAL) for _ in range(2)]
    wait_until(
        lambda: Run.objects.filter(pk__in=[r.pk for r in runs], status="running").count() == 2,
        RUN_TIMEOUT_MS / 1000,
        "the sleepers to start",
    )


def test_a_backfill_from_the_job_list_shows_its_progress_to_100_percent(
    page: Page,
    worker: object,
    beat: Callable[..., object],
    operations_job: Job,
    quiet_at_the_end: None,
) -> None:
    """The backfilled runs wait, held, and run one after another: the beat's
    sweep sends each (the job's overlap policy is skip)."""
    job = Job.objects.create(name="Hourly import", target="tests.echo")
    Trigger.objects.create(job=job, kind="cron", cron_expression="*/15 * * * *")
    on_the_quarter = datetime.now(UTC).replace(second=0, microsecond=0)
    on_the_quarter -= timedelta(minutes=on_the_quarter.minute % 15)
    start, end = on_the_quarter - timedelta(minutes=119), on_the_quarter - timedelta(minutes=1)
    fire_times = 7  # every quarter of an hour from 105 to 15 minutes before the last quarter
    report_worker()
    beat()
    page.context.add_init_script(RECORD_BAR)
    page.goto(JOB_LIST)

    run_action(page, "Backfill a past range…", job_row(page, "Hourly import"))
    expect(page.get_by_role("heading", name="Backfill a past range")).to_be_visible()
    page.get_by_label("From:", exact=True).fill(typed(start))
    page.get_by_label("To:", exact=True).fill(typed(end))
    busy_worker(seconds=4)  # long enough for the run page to load while it waits
    page.get_by_role("button", name="Backfill").click()

    expect(message(page)).to_have_text(
        re.compile(r"^Backfill of 1 job started as run #\d+: its progress shows here\.$")
    )
    page.evaluate("window.takt_same_page = true")  # gone if the page reloads
    live = live_panel(page)
    expect(live).to_have_attribute("data-status", "succeeded", timeout=RUN_TIMEOUT_MS)
    expect(live.locator("[data-live=percent]")).to_have_text(
        f"100 % ({fire_times} of {fire_times})"
    )
    expect(live.locator("[data-live=note]")).to_have_text(f"Hourly import (#{job.pk}): done")
    output = live.locator("[data-live=output]")
    expect(output).to_contain_text(
        f"Hourly import (#{job.pk}): {fire_times} fire time(s), 0 already had a run,"
        f" {fire_times} run(s) created"
    )
    seen = page.evaluate("window.takt_bar")
    assert seen[0] == [False, None], seen  # queued behind the sleepers: a bar without a value
    assert seen[-1] == [False, "100"], seen
    values = [float(value) for _, value in seen if value is not None]
    assert values == sorted(values), seen  # it only moves forward
    assert page.evaluate("window.takt_same_page") is True, "the page was reloaded"
    run = Run.objects.get(job=operations_job)
    assert (run.status, run.params["operation"], run.started_by) == (
        "succeeded",
        "backfill",
        "admin",
    )

    catchups = Run.objects.filter(job=job, trigger=RunTrigger.CATCHUP).order_by("scheduled_for")
    assert catchups.count() == fire_times
    assert catchups.first().scheduled_for == start + timedelta(minutes=14)  # type: ignore[union-attr]
    wait_until(
        lambda: all(r.status == RunStatus.SUCCEEDED for r in catchups.all()),
        RUN_TIMEOUT_MS / 1000,
        "the backfilled runs to succeed, one after another",
    )


def test_a_jobs_own_progress_shows_live_half_way_and_to_the_end(
    page: Page, worker: object, quiet_at_the_end: None, shot: Shot
) -> None:
    hold = f"takt-test:hold:{uuid.uuid4().hex}"
    job = Job.objects.create(
        name="Monthly invoices", target="tests.progress",
        params={"steps": 5, "hold_key": hold, "hold_after": 3},
    )  # fmt: skip
    report_worker()
    run = enqueue_job(job, trigger=RunTrigger.MANUAL)

    page.goto(run_change_url(run.pk))
    page.evaluate("window.takt_same_page = true")

    live = live_panel(page)
    expect(live.locator("progress")).to_be_in_viewport()  # in the first screen, unscrolled
    expect(live.locator("[data-live=percent]")).to_have_text(
        "60 % (3 of 5)", timeout=RUN_TIMEOUT_MS
    )
    expect(live.locator("[data-live=note]")).to_have_text("step 3")
    expect(live.locator("[data-live=status]")).to_have_text("running")
    expect(live.locator("progress")).to_have_attribute("value", "60")
    expect(live.locator("[data-live=output]")).to_have_text(
        re.compile(r"step 1 of 5\s+step 2 of 5\s+step 3 of 5\s*$")
    )
    shot(page, "run-live-progress")

    redis.Redis.from_url(settings.REDIS_URL).rpush(hold, "go on")

    expect(live).to_have_attribute("data-status", "succeeded", timeout=RUN_TIMEOUT_MS)
    expect(live.locator("[data-live=percent]")).to_have_text("100 % (5 of 5)")
    expect(live.locator("[data-live=output]")).to_contain_text("step 5 of 5")
    assert page.evaluate("window.takt_same_page") is True, "the page was reloaded"
    page.reload()
    expect(shown_value(page, "status_badge")).to_have_text("succeeded")
    expect(shown_value(page, "result")).to_have_text("5")


JOBS_YAML = """\
- key: reports.nightly
  name: Nightly report
  target: tests.echo
  triggers:
    - kind: cron
      cron_expression: "30 2 * * 1-5"
      timezone: Europe/Berlin
- key: backup.hourly
  name: Hourly backup
  target: tests.echo
  priority: 3
  triggers:
    - kind: interval
      interval_seconds: 3600
"""


def test_jobs_pasted_on_the_import_page_are_checked_then_imported_as_a_run(
    page: Page, worker: object, operations_job: Job, quiet_at_the_end: None, shot: Shot
) -> None:
    Job.objects.create(key="backup.hourly", name="Hourly backup", target="tests.echo", priority=5)
    page.goto(JOB_LIST)
    page.get_by_role("link", name="Import jobs").click()
    text = page.get_by_label("or paste it")

    text.fill(JOBS_YAML.replace('"30 2 * * 1-5"', '"30 25 * * 1-5"'))
    page.get_by_role("button", name="Check").click()

    expect(page.get_by_role("heading", name="Nothing can be imported: 1 problem")).to_be_visible()
    expect(page.locator("#takt-import-problems li")).to_have_text(
        [re.compile(r"key 'reports\.nightly'.*triggers\[0\]\.cron_expression: hour: 25")]
    )
    expect(page.get_by_role("button", name="Import")).to_have_count(0)
    assert not Job.objects.filter(key="reports.nightly").exists()

    text.fill(JOBS_YAML)
    page.get_by_role("button", name="Check").click()

    plan = page.locator("#takt-import-plan")
    # "job N": the Nth job of the document
    expect(plan).to_contain_text(re.compile(r"^create\s+job 1 \(key 'reports\.nightly'"))
    expect(plan).to_contain_text(re.compile(r"update\s+job 2 \(key 'backup\.hourly'"))
    expect(plan).to_contain_text("priority: 5 → 3")
    expect(plan).to_contain_text("trigger added: every 1 hour")
    expect(plan).to_contain_text("dry run, nothing written: 1 create, 1 update, 0 unchanged")
    assert not Job.objects.filter(key="reports.nightly").exists()
    shot(page, "import-plan")
    page.get_by_role("button", name="Import").click()

    expect(message(page)).to_have_text(
        re.compile(r"^The import of pasted text started as run #\d+: its progress shows here\.$")
    )
    live = live_panel(page)
    expect(live).to_have_attribute("data-status", "succeeded", timeout=RUN_TIMEOUT_MS)
    expect(live.locator("[data-live=output]")).to_contain_text("1 create, 1 update, 0 unchanged")
    imported: dict[str, Any] = {
        job.key: (job.name, job.priority, [t.kind for t in job.triggers.all()])
        for job in Job.objects.filter(key__in=["reports.nightly", "backup.hourly"])
    }
    assert imported == {
        "reports.nightly": ("Nightly report", 5, ["cron"]),
        "backup.hourly": ("Hourly backup", 3, ["interval"]),
    }
