"""Date-times typed in the admin by an operator in New York, against a
server in UTC (F-121): each input says it reads the browser's zone, and
what is stored is the instant typed there (03:10 in New York is 08:10 UTC
in winter, 07:10 in summer), never 03:10 UTC; Django's "You are 5 hours
behind server time" note is gone and its "Now" is the browser's time.
Read-only times (the job editor's created and changed, the Heartbeats and
Alerts lists) are drawn in New York with the zone's abbreviation."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Locator, Page, expect

from heartbeats.models import Alert, Heartbeat
from jobs.models import Job
from runs.models import Run
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.history import past_run
from tests.browser.pages import (
    JOB_ADD,
    QUEUE,
    RUN_LIST,
    Shot,
    add_trigger,
    expect_saved,
    fill_datetime,
    fill_job,
    job_change_url,
    message,
    save,
    times_localized,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_YORK = ZoneInfo(BROWSER_TIME_ZONE)
BROWSERS_ZONE = "America/New_York, your browser's time zone"
NEXT_YEAR = datetime.now(UTC).year + 1
WINTER_0310 = datetime(NEXT_YEAR, 1, 15, 3, 10, tzinfo=NEW_YORK)  # 08:10 UTC
SUMMER_0310 = datetime(NEXT_YEAR, 7, 15, 3, 10, tzinfo=NEW_YORK)  # 07:10 UTC


def zone_note(where: Locator) -> Locator:
    return where.locator(".takt-input-zone")


def test_trigger_times_typed_at_0310_in_new_york_are_stored_as_0810_utc(
    page: Page, shot: Shot
) -> None:
    page.goto(JOB_ADD)
    fill_job(page, name="One-off")
    winter, summer = add_trigger(page), add_trigger(page)
    for trigger, when in ((winter, WINTER_0310), (summer, SUMMER_0310)):
        trigger.get_by_label("Kind").select_option(label="Once")
        fill_datetime(trigger, "Run at", when)
        expect(zone_note(trigger).filter(visible=True)).to_have_text([BROWSERS_ZONE])
    expect(page.locator(".timezonewarning")).to_have_count(0)  # "You are 5 hours behind …"
    # "Check schedule" reads it in the same zone: 08:10 UTC, 03:10 in New York.
    preview = winter.locator(".takt-preview")
    expect(preview).to_contain_text(f"{NEXT_YEAR}-01-15 08:10:00 UTC")
    expect(preview).to_contain_text(f"{NEXT_YEAR}-01-15 03:10:00 EST")
    shot(page, "trigger-once-browser-zone", element=winter)

    interval = add_trigger(page)
    interval.get_by_label("Kind").select_option(label="Interval")
    interval.get_by_label("Interval seconds").fill("3600")
    fill_datetime(interval, "Start at", WINTER_0310)
    expect(zone_note(interval).filter(visible=True)).to_have_text([BROWSERS_ZONE])

    save(page)

    expect_saved(page, "One-off")
    triggers = Job.objects.get(name="One-off").triggers.all()
    stored = sorted(t.run_at for t in triggers if t.kind == "once")
    assert stored == [
        datetime(NEXT_YEAR, 1, 15, 8, 10, tzinfo=UTC),
        datetime(NEXT_YEAR, 7, 15, 7, 10, tzinfo=UTC),
    ]
    assert [t.start_at for t in triggers if t.kind == "interval"] == [
        datetime(NEXT_YEAR, 1, 15, 8, 10, tzinfo=UTC)
    ]


def test_now_beside_a_time_gives_the_browsers_time(page: Page) -> None:
    page.goto(JOB_ADD)
    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="Once")
    run_at = trigger.locator("p.datetime").filter(visible=True).first
    before = datetime.now(NEW_YORK)
    run_at.get_by_role("link", name="Now").last.click()  # the time's, after the date's Today
    after = datetime.now(NEW_YORK)
    wanted = {f"{before:%H:%M}", f"{after:%H:%M}"}
    expect(run_at.get_by_role("textbox").nth(1)).to_have_value(re.compile(r"^\d\d:\d\d:\d\d$"))
    assert run_at.get_by_role("textbox").nth(1).input_value()[:5] in wanted


def test_a_jobs_paused_until_is_read_and_shown_in_new_york(page: Page) -> None:
    job = Job.objects.create(name="Ledger", target="takt.hello_world")
    page.goto(job_change_url(job.pk))
    pause = page.locator("fieldset.collapse").filter(has_text="Pause and limits —")
    pause.locator("summary").click()
    pause.get_by_label("Paused", exact=True).check()
    fill_datetime(pause, "Paused until", WINTER_0310)
    expect(zone_note(pause)).to_have_text(BROWSERS_ZONE)

    page.get_by_role("button", name="Save and continue editing").click()

    expect(message(page, "success")).to_contain_text("was changed successfully")
    job.refresh_from_db()
    assert job.paused_until == datetime(NEXT_YEAR, 1, 15, 8, 10, tzinfo=UTC)
    pause.locator("summary").click()
    shown = pause.locator("p.datetime").first.get_by_role("textbox")
    expect(shown.nth(0)).to_have_value(f"{NEXT_YEAR}-01-15")
    expect(shown.nth(1)).to_have_value("03:10:00")  # shown back as typed, in New York


def test_the_run_lists_from_and_before_filters_read_new_york_time(page: Page) -> None:
    job = Job.objects.create(name="Ledger", target="tests.echo")
    early = past_run(job, started_at=datetime(2026, 1, 15, 7, 55, tzinfo=UTC))  # 02:55 EST
    late = past_run(job, started_at=datetime(2026, 1, 15, 8, 5, tzinfo=UTC))  # 03:05 EST
    page.goto(RUN_LIST)
    typed_in = page.locator("details[data-filter-title='enqueued from']")
    expect(zone_note(typed_in)).to_have_text(BROWSERS_ZONE)

    typed_in.get_by_label("enqueued from").fill("2026-01-15 03:00")
    typed_in.get_by_role("button", name="Go").click()

    expect(page).to_have_url(re.compile(r"enqueued_from=2026-01-15"))
    listed = page.locator("#result_list tbody tr")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text(f"#{late.pk}")
    assert Run.objects.filter(pk=early.pk).exists()  # there, and left out

    page.goto(RUN_LIST)
    before = page.locator("details[data-filter-title='enqueued before']")
    before.get_by_label("enqueued before").fill("2026-01-15 03:00")
    before.get_by_role("button", name="Go").click()

    expect(page).to_have_url(re.compile(r"enqueued_to=2026-01-15"))
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text(f"#{early.pk}")


def test_read_only_times_are_drawn_in_new_york_with_the_zones_name(page: Page) -> None:
    winter = datetime(2026, 1, 15, 12, 0, 5, tzinfo=UTC)  # 07:00:05 EST
    summer = datetime(2026, 7, 15, 12, 0, 5, tzinfo=UTC)  # 08:00:05 EDT
    Heartbeat.objects.create(
        name="nightly-backup", deadline_s=60, last_run_at=winter, last_success_at=summer
    )
    Alert.objects.create(
        key="backup-late",
        severity="warning",
        title="Backup late",
        first_seen_at=winter,
        last_seen_at=winter,
        resolved_at=summer,
    )
    job = Job.objects.create(name="Ledger", target="takt.hello_world")

    for url in ("/admin/takt_heartbeats/heartbeat/", "/admin/takt_heartbeats/alert/"):
        page.goto(url)
        times_localized(page)
        row = page.locator("#result_list tbody tr").first
        expect(row.locator("time")).to_have_text(
            ["2026-01-15 07:00:05 EST", "2026-07-15 08:00:05 EDT"]
        )

    page.goto(job_change_url(job.pk))
    times_localized(page)
    for field, value in (("created_at", job.created_at), ("updated_at", job.updated_at)):
        local = value.astimezone(NEW_YORK)
        shown = page.locator(f".fieldBox.field-{field}_shown time")
        expect(shown).to_have_text(f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}")
        expect(shown).to_have_attribute("title", f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC")


def test_the_zone_beside_a_typed_time_is_said_in_german(german_page: Page) -> None:
    german_page.goto(QUEUE)
    expect(german_page.locator("#takt-pause-form .takt-input-zone")).to_have_text(
        "America/New_York, die Zeitzone Ihres Browsers"
    )
