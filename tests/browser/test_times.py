"""Times in the admin as an operator in New York sees them, from a server
in UTC: in the browser's zone with its abbreviation (F-90, F-64; the
shared display of jobs/admin/display.py and takt/admin.js), on every page that
shows times, with the UTC value in each time's tooltip."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.api.ping import record_ping
from heartbeats.models import Heartbeat
from heartbeats.services import check_overdue
from jobs.models import Job, Trigger
from runs import queue
from runs.models import Run
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.history import past_run, report_beat, report_worker
from tests.browser.pages import (
    JOB_LIST,
    OPERATIONS,
    QUEUE,
    RUN_LIST,
    job_change_url,
    job_row,
    run_change_url,
    run_history,
    times_localized,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Once a page has loaded its scripts have run: a wrong time will not change.
SHORT_MS = 2_000


def in_browser_zone(moment: datetime) -> str:
    """`moment` to the minute in the browser's zone ("2026-01-15 07:00"), as
    takt/admin.js starts it (the seconds and the zone's name follow)."""
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    return f"{local:%Y-%m-%d %H:%M}"


def as_listed(moment: datetime) -> str:
    """`moment` as a list shows it in the browser's zone: today's date is
    left out ("07:00"), another day's is not."""
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    today = datetime.now(UTC).astimezone(ZoneInfo(BROWSER_TIME_ZONE)).date()
    return f"{local:%H:%M}" if local.date() == today else in_browser_zone(moment)


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
    # Noon UTC is today or tomorrow, whatever the hour the test runs at.
    expect(cell).to_contain_text(as_listed(trigger.next_run_at), timeout=SHORT_MS)
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


# --- every page an operator reads, with every kind of time on it ------------------

WINTER = datetime(2026, 1, 15, 12, 0, 5, tzinfo=UTC)  # 07:00:05 EST
SUMMER = datetime(2026, 7, 15, 12, 0, 5, tzinfo=UTC)  # 08:00:05 EDT
UTC_TEXT = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? UTC")


@pytest.fixture
def times_everywhere() -> dict[str, str]:
    """Jobs with next runs, runs in winter and summer and today, their
    heartbeats and an alert, an outside heartbeat's ping, a paused queue
    with an end, live beats and workers; returns the pages to look at."""
    ledger = Job.objects.create(name="Ledger", target="tests.echo")
    Trigger.objects.create(job=ledger, kind="cron", cron_expression="0 12 * * *", timezone="UTC")
    past_run(ledger, started_at=WINTER, duration_s=2.5)
    summer = past_run(ledger, started_at=SUMMER, status="failed", message="upstream is down")
    backup = Job.objects.create(name="Backup", target="tests.echo")
    Trigger.objects.create(job=backup, kind="interval", interval_seconds=3600)
    today = past_run(backup, started_at=timezone.now() - timedelta(minutes=3), output="copied\n")
    late = Job.objects.create(name="Late export", target="tests.echo", heartbeat_deadline_s=600)
    past_run(late, started_at=timezone.now() - timedelta(minutes=30))
    check_overdue(now=timezone.now())  # an alert whose message says since when
    Heartbeat.objects.create(name="nightly-backup", deadline_s=86400)
    record_ping("nightly-backup", "", now=SUMMER)
    record_ping("nightly-backup", "fail", now=timezone.now())
    queue.pause_queue(
        note="deploying", by="admin", now=timezone.now(), until=SUMMER.replace(year=2031)
    )
    report_beat()
    report_worker()
    return {
        "job list": JOB_LIST,
        "run list": RUN_LIST,
        "a run's page": run_change_url(summer.pk),
        "a run of today": run_change_url(today.pk),
        "the job editor": job_change_url(ledger.pk),
        "the operations page": OPERATIONS,
        "the landing page": "/admin/",
        "the queue page": QUEUE,
        "the heartbeat list": "/admin/takt_heartbeats/heartbeat/",
        "the alert list": "/admin/takt_heartbeats/alert/",
    }


def expected_text(iso: str, precision: str, compact: bool) -> str:
    """What takt/admin.js shows for the <time> of `iso` (UTC) in New York."""
    local = datetime.fromisoformat(iso).astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    text = f"{local:%Y-%m-%d %H:%M}" + (f":{local.second:02d}" if precision == "second" else "")
    text += f" {local.tzname()}"
    today = datetime.now(UTC).astimezone(ZoneInfo(BROWSER_TIME_ZONE)).date()
    return text[11:] if compact and local.date() == today else text


PAGES_WITH_TIMES = [
    "job list", "run list", "a run's page", "a run of today", "the job editor",
    "the operations page",
    "the landing page", "the queue page", "the heartbeat list", "the alert list",
]  # fmt: skip


@pytest.mark.parametrize("where", PAGES_WITH_TIMES)
def test_every_time_on_the_page_is_new_york_time_with_the_utc_value_in_its_title(
    page: Page, times_everywhere: dict[str, str], where: str
) -> None:
    page.goto(times_everywhere[where])
    live = page.locator(".takt-live")
    if live.count():
        expect(live.first).to_have_attribute("data-status", re.compile(r"\w"))  # it has polled
    times_localized(page)

    shown = page.locator("time.takt-time").evaluate_all(
        """times => times.map(t => ({iso: t.getAttribute("datetime"), title: t.title,
            text: t.textContent, precision: t.dataset.precision,
            compact: t.hasAttribute("data-compact"), relative: t.hasAttribute("data-relative")}))"""
    )

    assert len(shown) >= 2, f"{where} shows {len(shown)} times"
    for time in shown:
        utc = datetime.fromisoformat(time["iso"])
        assert time["title"] == f"{utc:%Y-%m-%d %H:%M:%S} UTC"
        wanted = expected_text(time["iso"], time["precision"], time["compact"])
        if time["relative"]:
            assert re.fullmatch(rf"{re.escape(wanted)} \((in \S+ \S+|\S+ \S+ ago)\)", time["text"])
        else:
            assert time["text"] == wanted
        assert wanted.endswith((" EST", " EDT"))
    assert {t["text"][-3:] for t in shown if not t["relative"]} >= (
        {"EST", "EDT"} if where in ("run list", "the job editor") else set()
    )
    text = page.locator("body").inner_text()
    for preview in page.locator(".takt-preview").all_inner_texts():
        text = text.replace(preview, "")  # it shows the trigger's zone (UTC here) on purpose
    found = UTC_TEXT.search(text)
    assert not found, f"a time in UTC is shown: {text[max(found.start() - 300, 0) : found.end()]!r}"
