"""The scripts of the job-side admin pages in German (issue 15, item 9): a
real Chromium whose reader chose German (Django's language cookie, which
LocaleMiddleware reads before Accept-Language) gets the texts the scripts
write from the catalogue jobs/urls.py serves (takt-jsi18n, djangojs.po):
the timeline's empty range, the load forecast's summary with German dates
and numbers, and the queue page's relative time. Without the cookie the
same texts are English."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from runs.queue import pause_queue
from tests.browser.pages import FORECAST, QUEUE, TIMELINE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def in_german(page: Page) -> Page:
    """`page` with the language cookie for the whole site (its path "/")."""
    origin = re.match(r"^https?://[^/]+", page.url)
    assert origin, page.url
    cookie = {"name": "django_language", "value": "de", "url": origin.group(0) + "/"}
    page.context.add_cookies([cookie])  # type: ignore[list-item]
    return page


def test_the_timeline_and_the_forecast_scripts_speak_german(page: Page) -> None:
    page.goto(TIMELINE)
    english = page.locator(".takt-timeline[data-state=ready] .takt-timeline-status")
    expect(english).to_have_text("Nothing ran and nothing is due in this range.")

    in_german(page).goto(TIMELINE)
    expect(page.locator("html")).to_have_attribute("lang", "de")
    status = page.locator(".takt-timeline[data-state=ready] .takt-timeline-status")
    expect(status).to_have_text("In diesem Zeitraum lief nichts und nichts ist fällig.")

    page.goto(FORECAST)
    summary = page.locator(".takt-forecast[data-state=ready] .takt-forecast-summary")
    # "0 Läufe aus 0 aktiven Auslösern, Do., 3. Dez. bis Mi., 9. Dez. (America/New_York).
    # Berechnet in 4 ms."
    expect(summary).to_have_text(
        re.compile(
            r"^0 Läufe aus 0 aktiven Auslösern, \w\w\., \d+\. \w+\.? bis .+ Berechnet in \d+ ms\.$"
        )
    )


def test_the_queue_page_says_its_relative_time_in_german(page: Page) -> None:
    now = timezone.now()
    pause_queue(note="Umzug", by="ops", until=now + timedelta(days=3), now=now)
    page.goto(QUEUE)
    expect(page.locator("time[data-relative][data-localized]")).to_contain_text("(in 3 d)")
    in_german(page).goto(QUEUE)
    expect(page.locator("#takt-queue-state")).to_be_visible()
    expect(page.locator("time[data-relative][data-localized]")).to_contain_text("(in 3 T)")
