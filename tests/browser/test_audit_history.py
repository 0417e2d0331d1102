"""The audit trail in the admin (F-120), as an operator uses it in a real
browser (New York, the server in UTC): a trigger's cron expression changed
in the job editor with a note, then the job's History shows the change —
who, from where, the note, the expression before and after, and the time
in the browser's zone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from jobs.audit import history_of
from jobs.models import ConcurrencyGroup, Job, Trigger
from tests.browser.conftest import OPERATOR
from tests.browser.pages import Shot, job_change_url, times_localized

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_trigger_changed_with_a_note_shows_in_the_jobs_history(page: Page, shot: Shot) -> None:
    job = Job.objects.create(name="Nightly export", target="takt.hello_world")
    trigger = Trigger.objects.create(
        job=job, kind="cron", cron_expression="0 3 * * *", timezone="UTC"
    )
    page.goto(job_change_url(job.pk))
    form = page.locator(f"#triggers-0:has(input[name='triggers-0-id'][value='{trigger.pk}'])")
    form.get_by_label("Cron expression").fill("30 4 * * *")
    page.get_by_label("Note for the history").fill("after the backup, ticket 42")
    page.get_by_role("button", name="Save and continue editing").click()
    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    stored = history_of(Trigger).objects.filter(id=trigger.pk).order_by("history_id").last()
    assert (stored.cron_expression, stored.history_change_reason, stored.audit_source) == (
        "30 4 * * *",
        "after the backup, ticket 42",
        "admin",
    )

    page.get_by_role("link", name="History").click()

    entry = page.locator("tr.takt-audit-entry[data-model='trigger'][data-action='change']")
    expect(entry).to_have_count(1)
    expect(entry).to_contain_text("after the backup, ticket 42")
    expect(entry).to_contain_text(OPERATOR[0])
    expect(entry).to_contain_text("admin")
    change = entry.locator("li[data-field='cron_expression']")
    expect(change.locator(".takt-before")).to_have_text("0 3 * * *")
    expect(change.locator(".takt-after")).to_have_text("30 4 * * *")
    times_localized(page)
    expect(entry.locator("time.takt-time")).to_have_text(re.compile(r"E[SD]T"))
    shot(page, "audit-history")


def test_the_note_and_the_history_speak_german(german_page: Page) -> None:
    page = german_page
    group = ConcurrencyGroup.objects.create(name="Datenbank", limit=1)
    page.goto(f"/admin/takt_jobs/concurrencygroup/{group.pk}/change/")
    page.get_by_label("Limit").fill("2")
    page.get_by_label("Notiz für den Verlauf").fill("zweite Replik")
    page.get_by_role("button", name="Sichern und weiter bearbeiten").click()
    expect(page.locator(".messagelist .success")).to_be_visible()

    page.get_by_role("link", name="Geschichte").click()  # Django's own word for the button

    expect(page.get_by_role("heading", name="Verlauf: Datenbank")).to_be_visible()

    expect(page.get_by_role("columnheader", name="Felder vorher → nachher")).to_be_visible()
    entry = page.locator("tr.takt-audit-entry[data-action='change']")
    expect(entry).to_contain_text("geändert")
    expect(entry).to_contain_text("zweite Replik")
    expect(entry.locator("li[data-field='limit'] .takt-after")).to_have_text("2")
