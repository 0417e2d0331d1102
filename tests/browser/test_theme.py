"""The admin in a light and a dark browser (the admin's theme "auto"
follows the system's): the run list's status badges keep a readable
contrast (WCAG's 4.5:1 for text) in both, and so does the link in the job
editor's latest-run heading (takt/admin.css, jobs/admin/display.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Locator, Page, expect

from jobs.models import Job
from runs.cancel import cancel_run
from runs.models import RunStatus
from tests.browser.history import past_run
from tests.browser.pages import RUN_LIST, Shot, job_change_url

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MIN_CONTRAST = 4.5  # WCAG 2 AA for normal text

# The contrast ratio of an element's text colour on its background colour
# (both as computed; the background must be opaque), by WCAG 2's formula.
CONTRAST = """element => {
  const rgb = text => text.match(/[\\d.]+/g).map(Number);
  const luminance = text => {
    const [r, g, b] = rgb(text).slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let back = element;
  while (back && rgb(getComputedStyle(back).backgroundColor)[3] === 0) back = back.parentElement;
  const style = getComputedStyle(element);
  const [a, b] = [luminance(style.color), luminance(getComputedStyle(back).backgroundColor)];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}"""


def contrasts(elements: Locator) -> dict[str, float]:
    """Each element's text and its contrast ratio."""
    return {
        element.inner_text(): round(element.evaluate(CONTRAST), 2) for element in elements.all()
    }


def runs_of_every_status() -> Job:
    job = Job.objects.create(
        name="Reports", target="tests.echo", overlap_policy="allow", max_instances=5
    )
    now = timezone.now()
    for n, status in enumerate(
        ["succeeded", "failed", "timed_out", "lost", "skipped", "running"], start=1
    ):
        past_run(job, started_at=now - timedelta(minutes=10 * n), status=status)
    cancelled = past_run(job, started_at=now - timedelta(minutes=70), status="running")
    cancel_run(cancelled.pk, by="admin", now=now)
    past_run(job, started_at=now + timedelta(hours=1), status="queued")  # due later
    return job


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_status_badges_keep_a_readable_contrast(
    themed_page: Callable[[str], Page], scheme: str, shot: Shot
) -> None:
    job = runs_of_every_status()
    page = themed_page(scheme)

    page.goto(RUN_LIST)

    badges = page.locator("#result_list .takt-badge")
    expect(badges).to_have_count(len(RunStatus))
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (background == "rgb(255, 255, 255)") == (scheme == "light"), background
    ratios = contrasts(badges)
    assert set(ratios) == {status.replace("_", " ") for status in RunStatus.values}
    assert all(ratio >= MIN_CONTRAST for ratio in ratios.values()), ratios
    page.get_by_role("button", name="Toggle navigation").click()  # room for every column
    shot(page, "run-list" if scheme == "light" else "run-list-dark")

    page.goto(job_change_url(job.pk))

    heading = page.locator("#takt-latest-run h2 a")
    expect(heading).to_be_visible()
    assert heading.evaluate(CONTRAST) >= MIN_CONTRAST
