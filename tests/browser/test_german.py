"""The job editor in German (issue 15, item 9): a real Chromium whose
language is German (de-DE) and whose time zone is New York, five hours from
the server's UTC, logs in, sees the editor's German labels, saves a job with
a bad value and sees the German error at the field it names."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from tests.browser.pages import JOB_ADD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_job_editor_in_german_names_the_field_of_a_bad_value(german_page: Page) -> None:
    page = german_page
    page.goto(JOB_ADD)

    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", name="Job hinzufügen")).to_be_visible()
    expect(page.get_by_text("Optionale feste Kennung", exact=False)).to_be_visible()
    page.get_by_label("Name:", exact=True).fill("Nächtlicher Bericht")
    page.get_by_label("Ziel:").fill("takt.hello_world")
    page.get_by_label("Parameter:", exact=True).fill("[1, 2]")  # not a JSON object
    page.get_by_role("button", name="Sichern", exact=True).click()

    expect(page.locator(".errornote")).to_be_visible()
    row = page.locator(".form-row.field-params")
    expect(row.locator("label")).to_have_text(re.compile(r"^Parameter:?$"))
    expect(row.locator(".errorlist")).to_have_text(
        'muss ein JSON-Objekt sein, z. B. {"name": "value"}'
    )
    assert not Job.objects.filter(name="Nächtlicher Bericht").exists()
