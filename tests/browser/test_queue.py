"""The queue page (F-92, F-28, F-29) as an operator uses it with a real
beat: pause the queue with a note and an end time (a past end is refused
at its field), see who paused it and until when, resume it; switch
maintenance mode on with a note and off again; the live beat with its
scheduler switch."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.processes import report_process
from jobs.models import QueueState
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.pages import (
    QUEUE,
    Shot,
    cell_texts,
    message,
    reload_until,
    times_localized,
    typed,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BEAT_NAME = "beat@browser-test"
BEAT_REPORT_TIMEOUT_S = 30  # the beat reports on its first tick, once it has started


def in_new_york(moment: datetime) -> str:
    local = moment.astimezone(ZoneInfo(BROWSER_TIME_ZONE))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def queue_state() -> QueueState:
    """The switches as stored (the row is made by the first switch)."""
    return QueueState.objects.filter(pk=1).first() or QueueState()


def test_the_queue_is_paused_with_a_note_and_an_end_then_resumed(
    page: Page, beat: Callable[..., object], shot: Shot
) -> None:
    beat(TAKT_BEAT_NAME=BEAT_NAME)
    report_process("worker:celery@host-a", now=timezone.now(), detail="concurrency=4")
    page.goto(QUEUE)
    live_beat = page.locator("#takt-beats tbody tr").filter(has_text=BEAT_NAME)
    reload_until(page, lambda: live_beat.count() == 1, BEAT_REPORT_TIMEOUT_S, "the beat's report")
    expect(live_beat.locator("td").nth(1)).to_have_text("on")
    state = page.locator("#takt-queue-state")
    expect(state).to_have_text("running")
    pause = page.locator("#takt-pause-form")

    yesterday = datetime.now(UTC) - timedelta(days=1)
    pause.get_by_label("Note").fill("Deploying the new database")
    pause.get_by_label("Resume by itself at").fill(typed(yesterday))
    page.locator("#takt-pause").click()

    # In the zone it was typed in, which the field names.
    expect(pause.locator(".errorlist")).to_have_text(
        f"{typed(yesterday, '%Y-%m-%d %H:%M %Z')} is in the past"
    )
    expect(pause.locator(".takt-input-zone")).to_have_text(
        "America/New_York, your browser's time zone"
    )
    expect(state).to_have_text("running")
    assert not queue_state().paused

    # 22 hours ahead, not 24: a day to the minute rounds to "in 1 d" when the
    # page shows it within half a second of the minute it was typed in.
    until = (datetime.now(UTC) + timedelta(hours=22)).replace(second=0, microsecond=0)
    pause.get_by_label("Resume by itself at").fill(typed(until))
    page.locator("#takt-pause").click()

    expect(message(page)).to_have_text("Queue paused.")
    expect(state).to_have_text("paused")
    row = page.locator("tr", has=state)
    paused_at = queue_state().paused_at
    assert paused_at is not None
    expect(row).to_contain_text("“Deploying the new database” by admin at")
    times_localized(page)
    expect(row.locator("time")).to_have_text(
        [in_new_york(paused_at), re.compile(rf"^{re.escape(in_new_york(until))} \(in 2\d h\)$")]
    )
    expect(page.locator("#takt-resume")).to_be_visible()
    assert (queue_state().paused_by, queue_state().paused_until) == ("admin", until)
    shot(page, "queue")

    page.locator("#takt-resume").click()

    expect(message(page)).to_have_text("Queue resumed.")
    expect(state).to_have_text("running")
    assert not queue_state().paused


def test_maintenance_mode_is_switched_on_with_a_note_and_off(page: Page) -> None:
    page.goto(QUEUE)
    switch = page.locator("#takt-maintenance-state")
    expect(switch).to_have_text("off")

    page.locator("#takt-maintenance-form").get_by_label("Note").fill("Upgrading Redis")
    page.locator("#takt-maintenance-on").click()

    expect(message(page)).to_have_text("Maintenance mode on.")
    expect(switch).to_have_text("on")
    expect(page.locator("tr", has=switch)).to_contain_text(
        "Upgrading Redis (admin) — only jobs allowed during maintenance start"
    )
    assert queue_state().maintenance

    page.locator("#takt-maintenance-off").click()

    expect(message(page)).to_have_text("Maintenance mode off.")
    expect(switch).to_have_text("off")
    assert not queue_state().maintenance


def test_the_beats_table_shows_each_live_beats_scheduler_switch_and_clock(page: Page) -> None:
    """The switch as each beat reports it (TAKT_SCHEDULER_ENABLED), how far
    each process's clock is from the database's (issue 28: over
    TAKT_CLOCK_SKEW_WARN_SECONDS, 2 s, it stands out), with the time it was
    last seen in the browser's zone."""
    seen_at = timezone.now().replace(microsecond=0)
    report_process("beat@host-a", now=seen_at, detail="scheduler=on clock=+0.2")
    report_process("beat@host-b", now=seen_at, detail="scheduler=off clock=+90.0")
    report_process("worker:celery@host-a", now=seen_at, detail="concurrency=4 clock=-3.5")
    report_process("worker:celery@host-c", now=seen_at, detail="concurrency=2")

    page.goto(QUEUE)

    times_localized(page)
    seen = in_new_york(seen_at)
    assert cell_texts(page.locator("#takt-beats tbody tr")) == [
        ["beat@host-a", "on", "+0.2 s", seen],
        ["beat@host-b", "off (TAKT_SCHEDULER_ENABLED=false)", "+90.0 s", seen],
    ]
    assert cell_texts(page.locator("#takt-workers tbody tr")) == [
        ["worker:celery@host-a", "4", "-3.5 s", seen],
        ["worker:celery@host-c", "2", "—", seen],
    ]
    off = page.locator(".takt-clock.takt-status-failed")
    expect(off).to_have_count(2)
    expect(off.first).to_have_text("+90.0 s")
    expect(page.locator("tr", has_text="Scheduling")).to_contain_text(
        "on (at least one live beat dispatches by schedule)"
    )
