"""The operations page in German (issue 15, item 9): a real Chromium whose
language is German (de-DE) and whose time zone is New York, five hours from
the server's UTC, logs in through the German login page, opens the
operations page and sees its headings, states and alerts in German with the
times in its own zone, marks an alert seen and reads the German message,
and finds the Takt summary on the admin index in German."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from heartbeats.alerts import raise_alert
from heartbeats.models import Alert, Heartbeat

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OPERATIONS = "/admin/takt_heartbeats/heartbeat/operations/"
LAST_RUN = datetime(2026, 1, 15, 12, 0, 5, tzinfo=UTC)  # 07:00:05 in New York


def test_the_operations_page_in_german(german_page: Page) -> None:
    Heartbeat.objects.create(name="stale", deadline_s=60, last_run_at=LAST_RUN,
                             last_success_at=LAST_RUN, last_status="succeeded")  # fmt: skip
    Heartbeat.objects.create(name="never", deadline_s=60)
    alert = raise_alert("overdue:x", severity="critical", title="Run 'stale' overdue",
                        message="x", now=timezone.now())  # fmt: skip
    page = german_page
    page.goto(OPERATIONS)

    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", name="Betrieb", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Wiederkehrende Läufe")).to_be_visible()
    expect(page.get_by_role("columnheader", name="Frist (Sekunden)")).to_be_visible()
    stale = page.get_by_role("row").filter(has_text="stale")
    expect(stale.locator(".takt-badge")).to_have_text("ausgefallen")  # as on every page
    expect(stale.locator("time").first).to_contain_text("07:00:05")  # the browser's zone
    never = page.get_by_role("row").filter(has_text="never")
    expect(never.locator(".takt-badge")).to_have_text("neu")
    row = page.get_by_role("row").filter(has_text="Run 'stale' overdue")
    expect(row).to_contain_text("kritisch")

    page.get_by_role("button", name="Die angekreuzten Alarme als gesehen markieren").click()

    expect(page.locator(".messagelist")).to_have_text("1 Alarm als gesehen markiert.")
    assert Alert.objects.get(pk=alert.pk).seen

    page.goto("/admin/")
    expect(page.get_by_role("heading", name="Offene Alarme")).to_be_visible()
    expect(page.get_by_role("link", name="Betriebsseite →")).to_be_visible()
