"""An operator logs in, adds a job with a cron trigger, finds it in the job
list with its schedule in words, opens it and runs it now (F-90, F-91,
F-51), in a real browser in New York against a server in UTC."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from tests.browser.conftest import VIEWPORT
from tests.browser.pages import (
    JOB_ADD,
    JOB_LIST,
    Shot,
    add_trigger,
    expect_saved,
    fill_job,
    job_change_url,
    job_row,
    reload_until,
    run_history,
)
from tests.browser.pages import save as press_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_logs_in_through_the_login_page(
    anonymous_page: Page, operator: tuple[str, str]
) -> None:
    page = anonymous_page
    page.goto("/admin/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next=/admin/$"))
    page.get_by_label("Username").fill(operator[0])
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".errornote")).to_contain_text("enter the correct username and password")

    page.get_by_label("Password").fill(operator[1])
    page.get_by_role("button", name="Log in").click()

    expect(page).to_have_url(re.compile(r"/admin/$"))
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    expect(page.locator("#takt-landing")).to_be_visible()  # the Takt landing page
    expect(
        page.locator("#takt_jobs-job").get_by_role("link", name="Jobs", exact=True)
    ).to_be_visible()


def test_a_job_added_with_a_cron_trigger_is_listed_with_its_schedule_in_words(
    page: Page,
) -> None:
    page.goto(JOB_ADD)
    fill_job(page, name="Nightly report")
    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="Cron expression")
    trigger.get_by_label("Cron expression").fill("30 2 * * 1-5")

    press_save(page)

    expect_saved(page, "Nightly report")
    row = job_row(page, "Nightly report")
    expect(row).to_contain_text("At 02:30, Monday through Friday (UTC)")
    job = Job.objects.get(name="Nightly report")
    assert job.target == "takt.hello_world"
    assert [(t.kind, t.cron_expression) for t in job.triggers.all()] == [("cron", "30 2 * * 1-5")]


def test_run_now_shows_the_run_and_its_output_in_the_history(
    page: Page, worker: object, shot: Shot
) -> None:
    """A real worker runs it; the operator reloads until it has ended."""
    Job.objects.create(name="Greeter", target="takt.hello_world", enabled=False)
    page.goto(JOB_LIST)
    page.get_by_role("link", name="Greeter", exact=True).click()
    expect(page.get_by_role("heading", name="Change job")).to_be_visible()

    page.get_by_role("button", name="Run now").click()

    message = page.locator(".messagelist .success")
    expect(message).to_have_text(re.compile(r"Run #\d+ queued\."))
    run_id = re.search(r"#(\d+)", message.inner_text()).group(1)  # type: ignore[union-attr]
    history = run_history(page).filter(has_text=f"#{run_id}")
    reload_until(page, lambda: "succeeded" in history.inner_text(), 30, f"run #{run_id} to succeed")
    expect(history).to_contain_text("manual")
    history.get_by_text("output").click()  # the output is folded under its summary
    expect(history.locator("pre")).to_contain_text("Hello, world! This is 'Greeter'.")
    expect(history.locator("pre")).to_contain_text("Started by trigger: manual")
    box = history.locator("pre").bounding_box()
    assert box is not None and box["x"] + box["width"] <= VIEWPORT["width"], "off the window"
    shot(page, "job-run-history", element=page.locator("#takt-history"))


def test_the_policies_are_collapsed_under_headings_that_say_what_they_hold(
    page: Page, shot: Shot
) -> None:
    job = Job.objects.create(name="Ledger", target="takt.hello_world", max_runs=10)
    page.goto(job_change_url(job.pk))

    policies = page.locator("fieldset.collapse")
    expect(policies.locator("summary")).to_have_text(
        [
            "Command — for command jobs only",
            "Script — for script jobs only",  # shown to superusers (F-02 `script`)
            "Dispatch — priority 5 · queue takt · timeout 5 min 00 s (stop) · overlap skip"
            " · missed runs: run once (latest)",
            "Coordination — no group · no condition · no parent",
            "Retries — no retries",
            "Pause and limits — run limit 10 (0 done)",
            "Operations — no deadline · no notifications",
        ]
    )
    retries = policies.filter(has_text="Retries —")
    expect(retries.get_by_label("Max retries")).to_be_hidden()
    shot(page, "job-editor-policies", between=(policies.first, policies.last))

    retries.locator("summary").click()
    retries.get_by_label("Max retries").fill("3")
    page.get_by_role("button", name="Save and continue editing").click()

    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    expect(retries.locator("summary")).to_have_text(
        "Retries — up to 3 · first after 10.0 s ×2, at most 1 h 00 min"
    )
    expect(retries.get_by_label("Max retries")).to_be_hidden()  # collapsed again
    job.refresh_from_db()
    assert job.max_retries == 3
