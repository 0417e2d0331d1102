"""The Timeline (F-94) and the Load forecast (F-95) drawn in a real browser
from runs and triggers made through the services: the bars, points and
ticks drawn are the runs and fire times in range; a range button changes
the range; clicking a bar opens its run; the forecast is binned by the
browser's zone, and a crowded 03:00 in New York is its busiest hour."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from jobs.models import Job, Trigger
from runs.models import Run
from tests.browser.conftest import BROWSER_TIME_ZONE
from tests.browser.history import past_run
from tests.browser.pages import FORECAST, TIMELINE, Shot
from tests.live_fixtures import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NEW_YORK = ZoneInfo(BROWSER_TIME_ZONE)
CRON_FILL = "0 3 * * *"  # 03:00 in New York, six jobs at once
DAYS = 7

# What the timeline drew, from the SVG: a bar is a run's rectangle in its
# status colour (the badge colours, read from the page's CSS), a point a
# scatter symbol (outlined #555), a tick a line of an upcoming fire time
# (grey, or the failed colour when due).
DRAWN = """chart => {
  const probe = document.createElement("span");
  document.body.appendChild(probe);
  const colour = status => {
    probe.className = "takt-badge takt-status-" + status;
    return getComputedStyle(probe).backgroundColor;
  };
  const statuses = ["succeeded", "failed", "timed_out", "lost", "running", "queued", "skipped",
                    "cancelled"];
  const fills = new Set(statuses.map(colour));
  const failed = colour("failed");
  probe.remove();
  const counts = {bars: 0, points: 0, ticks: 0};
  chart.querySelectorAll("svg path").forEach(path => {
    const fill = path.getAttribute("fill"), stroke = path.getAttribute("stroke");
    if (stroke === "#555") counts.points += 1;
    else if (fills.has(fill)) counts.bars += 1;
    else if (stroke === "#6b7785" || stroke === failed) counts.ticks += 1;
  });
  return counts;
}"""

# The forecast's cells: the heat map's rectangles, all of one size (the
# grid's width / 24 by its height / days); grey ones are past or missing
# hours, the others are coloured by their count.
CELLS = """chart => {
  const boxes = Array.from(chart.querySelectorAll("svg path"), path => {
    const box = path.getBBox();
    return {size: Math.round(box.width) + "x" + Math.round(box.height),
            grey: (path.getAttribute("fill") || "").replace(/\\s/g, "").startsWith("rgba(128,128,128")
              || path.getAttribute("fill") === "rgb(128,128,128)"};
  });
  const sizes = {};
  boxes.forEach(b => { sizes[b.size] = (sizes[b.size] || 0) + 1; });
  const cell = Object.keys(sizes).sort((a, b) => sizes[b] - sizes[a])[0];
  const cells = boxes.filter(b => b.size === cell);
  return {coloured: cells.filter(b => !b.grey).length, grey: cells.filter(b => b.grey).length};
}"""


def stable_box(locator: Locator) -> dict[str, float]:
    """The element's bounding box once three reads 100 ms apart agree."""
    seen: list[object] = []

    def still() -> object:
        seen.append(locator.bounding_box())
        return seen[-1] is not None and seen[-3:] == [seen[-1]] * 3

    wait_until(still, 20, "the bar to stand still")
    box = seen[-1]
    assert isinstance(box, dict)
    return box


def ready(chart: Locator) -> Locator:
    expect(chart).to_have_attribute("data-state", "ready")
    return chart


def data(chart: Locator, *names: str) -> dict[str, str | None]:
    return {name: chart.get_attribute(f"data-{name}") for name in names}


def timeline_runs() -> dict[str, Any]:
    """Runs of "Ingest" in the last 24 hours (five ended, one skipped, one
    running) and a trigger of "Report" firing at a minute 30 minutes from
    now, every hour."""
    now = timezone.now().replace(microsecond=0)
    ingest = Job.objects.create(name="Ingest", target="tests.echo")
    for hours_ago in (10, 5, 2):
        past_run(ingest, started_at=now - timedelta(hours=hours_ago), duration_s=600)
    failed = past_run(ingest, started_at=now - timedelta(hours=3), duration_s=600, status="failed")
    past_run(ingest, started_at=now - timedelta(minutes=20), duration_s=300)
    past_run(ingest, started_at=now - timedelta(hours=1), status="skipped")
    past_run(ingest, started_at=now - timedelta(minutes=10), status="running")
    report = Job.objects.create(name="Report", target="tests.echo")
    minute = (now + timedelta(minutes=30)).minute
    Trigger.objects.create(job=report, kind="cron", cron_expression=f"{minute} * * * *")
    return {"failed": failed}


def test_the_timeline_draws_the_runs_and_fire_times_and_opens_a_run(page: Page, shot: Shot) -> None:
    made = timeline_runs()

    page.goto(TIMELINE)

    chart = ready(page.locator(".takt-timeline"))
    assert data(chart, "range", "rows", "bars", "points", "ticks", "truncated") == {
        "range": "24h",
        "rows": "2",  # Ingest and Report, by name
        "bars": "6",  # five ended runs and the running one, start to end
        "points": "1",  # the skipped run
        "ticks": "4",  # Report's next four hours
        "truncated": "",
    }
    assert chart.evaluate(DRAWN) == {"bars": 6, "points": 1, "ticks": 4}
    expect(chart.locator(".takt-chart")).to_contain_text("Ingest")
    expect(chart.locator(".takt-chart")).to_contain_text("Report")
    shot(page, "timeline")

    chart.locator("button[data-range='1h']").click()

    expect(chart).to_have_attribute("data-range", "1h")
    expect(chart).to_have_attribute("data-bars", "2")  # the last 45 minutes: two runs
    ready(chart)
    assert data(chart, "rows", "points", "ticks") == {"rows": "1", "points": "0", "ticks": "0"}
    assert chart.evaluate(DRAWN) == {"bars": 2, "points": 0, "ticks": 0}
    expect(chart.locator("button[data-range='1h']")).to_have_class(re.compile("takt-active"))

    chart.locator("button[data-range='24h']").click()
    expect(chart).to_have_attribute("data-bars", "6")
    ready(chart)
    failed_colour = page.evaluate(
        """() => { const s = document.createElement("span");
        s.className = "takt-badge takt-status-failed"; document.body.appendChild(s);
        const c = getComputedStyle(s).backgroundColor; s.remove(); return c; }"""
    )
    bar = chart.locator(f"svg path[fill='{failed_colour}']")
    expect(bar).to_have_count(1)
    opened = re.compile(rf"/admin/takt_runs/run/{made['failed'].pk}/change/$")
    # The bar is a few pixels wide and the chart may still be laying itself
    # out (slower on a busy machine): point at its middle once it stands
    # still, wait for the chart to say it sees that run there (its tooltip),
    # click, then wait for the page it opens (a click is never repeated: a
    # second one would land on the run's page while it loads).
    box = stable_box(bar)
    middle = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.move(*middle)
    expect(chart.get_by_text(f"run #{made['failed'].pk}")).to_be_visible()
    page.mouse.click(*middle)
    expect(page).to_have_url(opened, timeout=30_000)
    expect(page).to_have_url(re.compile(rf"/admin/takt_runs/run/{made['failed'].pk}/change/$"))
    assert Run.objects.get(pk=made["failed"].pk).status == "failed"


def first_fire(expression: str, zone: ZoneInfo, after: datetime) -> datetime:
    return next(CronSim(expression, after.astimezone(zone)))


def fire_count(expression: str, zone: ZoneInfo, start: datetime, end: datetime) -> int:
    """Fire times of `expression` in `zone` in [start, end), by cronsim."""
    n = 0
    for moment in CronSim(expression, (start - timedelta(microseconds=1)).astimezone(zone)):
        if moment >= end:
            return n
        n += 1
    raise AssertionError("unreachable")


def forecast_end(now: datetime) -> datetime:
    """The first instant after the forecast's last day in New York."""
    last = now.astimezone(NEW_YORK).date() + timedelta(days=DAYS)
    return datetime(last.year, last.month, last.day, tzinfo=NEW_YORK).astimezone(UTC)


def hours_ahead(now: datetime, end: datetime) -> int:
    """The New York (date, hour) cells from now's hour to `end`."""
    cells, at = set(), now.replace(minute=0, second=0, microsecond=0)
    while at < end:
        local = at.astimezone(NEW_YORK)
        cells.add((local.date(), local.hour))
        at += timedelta(hours=1)
    return len(cells)


def test_the_load_forecast_is_in_the_browsers_zone_with_a_crowded_0300(
    page: Page, shot: Shot
) -> None:
    for n in range(1, 7):
        job = Job.objects.create(name=f"Night batch {n}", target="tests.echo")
        Trigger.objects.create(
            job=job, kind="cron", cron_expression=CRON_FILL, timezone=BROWSER_TIME_ZONE
        )
    hourly = Job.objects.create(name="Hourly sync", target="tests.echo")
    Trigger.objects.create(job=hourly, kind="cron", cron_expression="0 * * * *", timezone="UTC")
    now = datetime.now(UTC)

    page.goto(FORECAST)

    chart = ready(page.locator(".takt-forecast"))
    end = forecast_end(now)
    crowded = first_fire(CRON_FILL, NEW_YORK, now).astimezone(NEW_YORK)
    expected_total = 6 * fire_count(CRON_FILL, NEW_YORK, now, end) + fire_count(
        "0 * * * *", ZoneInfo("UTC"), now, end
    )
    assert data(chart, "zone", "total", "max", "busiest") == {
        "zone": BROWSER_TIME_ZONE,
        "total": str(expected_total),
        "max": "7",  # six night batches and the hourly sync
        "busiest": f"{crowded:%Y-%m-%d} 03",
    }
    cells = int(chart.get_attribute("data-cells") or 0)
    assert cells == hours_ahead(now, end)
    assert chart.evaluate(CELLS) == {"coloured": cells, "grey": DAYS * 24 - cells}
    expect(chart.locator(".takt-forecast-summary")).to_contain_text(
        f"{expected_total:,} runs from 7 active triggers"
    )
    expect(chart.locator(".takt-forecast-summary")).to_contain_text(
        f"busiest hour: {crowded:%a} {crowded.day} {crowded:%b} 03:00 with 7 runs"
    )
    shot(page, "forecast")

    chart.locator("button[data-scale]").click()
    expect(chart).to_have_attribute("data-scale", "log")
    assert chart.evaluate(CELLS)["coloured"] == cells
