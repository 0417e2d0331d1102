"""Job kinds in the admin (F-02). An operator adds a command job, runs it on a
real worker and reads its output with stderr marked; a working directory
given as a relative path is refused at its field and nothing is stored. An
operator picks a system function from the Target field's suggestions, and
a param it does not take is refused at Params. An operator gives a Celery
task's job its positional args and runs it; args for an @takt_job function
are refused at Args. In a real browser in New York against a server in UTC."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from runs.models import Run
from tests.browser.pages import (
    JOB_ADD,
    JOB_LIST,
    Shot,
    expect_saved,
    field_errors,
    job_change_url,
    reload_until,
    run_history,
)
from tests.browser.pages import save as press_save

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def fill_command_job(page: Page, name: str, command: str, **fields: str) -> None:
    """On the Add job page: name, kind "Command", and the Command section's
    fields by label."""
    page.goto(JOB_ADD)
    page.get_by_label("Name:", exact=True).fill(name)
    page.locator("#id_kind").select_option(
        label="Command (a program)"
    )  # the job's, not a trigger's
    section = page.locator("fieldset").filter(has_text="Command —")
    section.locator("summary").click()
    section.get_by_label("Command:").fill(command)
    for label, value in fields.items():
        section.get_by_label(label).fill(value)


def test_an_operator_adds_a_command_job_and_runs_it(page: Page, worker: object, shot: Shot) -> None:
    fill_command_job(
        page,
        "Archive inbox",
        '["sh", "-c", "echo moved 3 files; echo 1 skipped >&2; exit 3"]',
        **{"Success codes:": "[0, 3]", "Process priority (nice):": "5"},
    )
    press_save(page)

    expect_saved(page, "Archive inbox")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name="Archive inbox"))
    expect(row).to_contain_text("$ sh -c 'echo moved 3 files; echo 1 skipped >&2; exit 3'")
    job = Job.objects.get(name="Archive inbox")
    assert (job.kind, job.success_codes, job.nice, job.target) == ("command", [0, 3], 5, "")

    row.get_by_role("link", name="Archive inbox").click()
    # Open, not folded, for a command job: a heading, not a summary.
    heading = "Command — $ sh -c 'echo moved 3 files; echo 1 skipped >&2; exit 3'"
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    expect(page.get_by_label("Command:")).to_be_visible()
    triggers = page.get_by_role("heading", name="Triggers")
    command_box = page.get_by_label("Command:").bounding_box()
    triggers_box = triggers.bounding_box()
    assert command_box and triggers_box and command_box["y"] < triggers_box["y"]  # before them
    shot(page, "command-job-editor")
    page.get_by_role("button", name="Run now").click()
    message = page.locator(".messagelist .success")
    expect(message).to_have_text(re.compile(r"Run #\d+ queued\."))
    run_id = re.search(r"#(\d+)", message.inner_text()).group(1)  # type: ignore[union-attr]
    history = run_history(page).filter(has_text=f"#{run_id}")
    reload_until(page, lambda: "succeeded" in history.inner_text(), 30, f"run #{run_id} to end")
    history.get_by_text("output").click()
    output = history.locator("pre")
    expect(output).to_contain_text("moved 3 files\n[stderr] 1 skipped")
    shot(page, "command-job-run", element=page.locator("#takt-history"))


def test_a_relative_working_directory_is_refused_at_its_field(page: Page) -> None:
    fill_command_job(page, "Cleanup", '["find", ".", "-delete"]', **{"Working directory:": "tmp"})
    press_save(page)

    section = page.locator("fieldset").filter(has_text="Command —")
    expect(field_errors(section, "cwd")).to_have_text(
        "'tmp' is a relative path: give the working directory as an absolute path"
    )
    expect(page).not_to_have_url(JOB_LIST)
    assert not Job.objects.filter(name="Cleanup").exists()


def test_an_operator_picks_a_system_function_from_the_suggestions(page: Page) -> None:
    page.goto(JOB_ADD)
    page.get_by_label("Name:", exact=True).fill("Nightly checks")
    page.locator("#id_kind").select_option(label="System function (built in)")
    target = page.get_by_label("Target")
    options = page.locator(f"datalist#{target.get_attribute('list')} option")
    expect(options.first).to_have_attribute("value", "takt.maintenance")
    expect(options.filter(has_text="Pause the queue (params: note")).to_have_count(1)
    target.fill("takt.maintenance")
    page.locator("#id_params").fill('{"only": ["vacuum"]}')
    press_save(page)

    expect(field_errors(page.locator("form"), "params")).to_have_text(
        "only: a list of sections of lost, expire, cleanup, decisions, checks, schedules, got ['vacuum']"
    )
    assert not Job.objects.filter(name="Nightly checks").exists()

    page.locator("#id_params").fill('{"only": ["checks"]}')
    press_save(page)

    expect_saved(page, "Nightly checks")
    job = Job.objects.get(name="Nightly checks")
    assert (job.kind, job.target, job.params) == (
        "system",
        "takt.maintenance",
        {"only": ["checks"]},
    )


def test_an_operator_gives_a_celery_task_its_args_and_runs_it(page: Page, worker: object) -> None:
    job = Job.objects.create(name="Beat task", target="tests.celery_echo", params={"k": 2})
    page.goto(job_change_url(job.pk))
    page.get_by_label("Args:").fill('[1, "x"]')
    press_save(page)

    expect(page.locator(".messagelist .success")).to_contain_text("was changed successfully")
    assert Job.objects.get(pk=job.pk).args == [1, "x"]
    page.goto(job_change_url(job.pk))
    page.get_by_role("button", name="Run now").click()
    message = page.locator(".messagelist .success")
    expect(message).to_have_text(re.compile(r"Run #\d+ queued\."))
    run_id = int(re.search(r"#(\d+)", message.inner_text()).group(1))  # type: ignore[union-attr]
    history = run_history(page).filter(has_text=f"#{run_id}")
    reload_until(page, lambda: "succeeded" in history.inner_text(), 30, f"run #{run_id} to end")
    assert Run.objects.get(pk=run_id).result == {"args": [1, "x"], "kwargs": {"k": 2}}


def test_args_for_an_at_takt_job_function_are_refused_at_their_field(page: Page) -> None:
    job = Job.objects.create(name="Nightly report", target="tests.echo")
    page.goto(job_change_url(job.pk))
    page.get_by_label("Args:").fill('[1, "x"]')
    press_save(page)

    expect(field_errors(page.locator("form"), "args")).to_have_text(
        "only a Celery task target takes positional arguments: 'tests.echo' is registered"
        " with @takt_job and gets the run's context (give it params)"
    )
    expect(page).not_to_have_url(JOB_LIST)
    assert Job.objects.get(pk=job.pk).args == []
