"""A file trigger as an operator adds it in a real browser (F-16): "Add
another Trigger", kind "File in a watched folder", only its fields shown,
a folder that does not exist refused live and on save beside the field,
then the real folder checked live ("when a file matching *.csv appears or
changes in …", no fire times) and saved, with the warning that the job's
overlap policy would skip files that arrive while it is busy."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from tests.browser.pages import (
    Shot,
    add_trigger,
    field_errors,
    job_change_url,
    message,
    save,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_file_trigger_is_added_checked_live_and_saved(
    page: Page, shot: Shot, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    job = Job.objects.create(name="Import orders", target="takt.hello_world")
    page.goto(job_change_url(job.pk))

    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="File in a watched folder")
    expect(trigger.get_by_label("Cron expression")).to_be_hidden()
    expect(trigger.get_by_label("Timezone")).to_be_hidden()
    expect(trigger.get_by_label("Jitter (seconds)")).to_be_hidden()
    expect(trigger.get_by_label("File pattern")).to_be_visible()
    expect(trigger.get_by_label("Settle time (seconds)")).to_have_value("2")

    trigger.get_by_label("Folder:", exact=True).fill("/nonexistent/takt-inbox")
    preview = trigger.locator(".takt-preview")
    expect(trigger).to_contain_text("/nonexistent/takt-inbox does not exist on")
    save(page)
    expect(field_errors(page.locator("#triggers-0"), "watch_folder")).to_contain_text(
        "does not exist on"
    )
    assert not job.triggers.exists()  # nothing stored

    trigger = page.locator("#triggers-0")
    trigger.get_by_label("Folder:", exact=True).fill(str(inbox))
    trigger.get_by_label("File pattern").fill("*.csv")
    trigger.get_by_label("Include subfolders").check()
    preview = trigger.locator(".takt-preview")
    expect(preview.locator(".takt-preview-words")).to_have_text(
        f"when a file matching *.csv appears or changes in {inbox} or a folder below it,"
        " once unchanged for 2 s"
    )
    expect(preview).to_contain_text(
        "No fire times: it starts once for each matching file that arrives or changes."
    )
    shot(page, "trigger-file", element=trigger)
    save(page)

    expect(message(page, "success")).to_contain_text("was changed successfully")
    expect(message(page, "warning")).to_contain_text(
        "the job's overlap policy is 'skip': a file that arrives while its run for another"
        " file is active is recorded skipped"
    )
    saved = job.triggers.get()
    assert (saved.kind, saved.watch_folder, saved.watch_pattern, saved.watch_recursive) == (
        "file",
        str(inbox),
        "*.csv",
        True,
    )
    assert saved.next_run_at is None and saved.active


def test_a_system_folder_is_refused_beside_the_field_live_and_on_save(page: Page) -> None:
    """Issue 25: with TAKT_WATCH_ROOTS unset no system folder is watched;
    the answer does not say whether the folder exists."""
    job = Job.objects.create(name="Import orders", target="takt.hello_world")
    page.goto(job_change_url(job.pk))
    trigger = add_trigger(page)
    trigger.get_by_label("Kind").select_option(label="File in a watched folder")
    trigger.get_by_label("Folder:", exact=True).fill("/root")
    expect(trigger).to_contain_text("/root is a system folder: Takt does not watch it")
    save(page)
    expect(field_errors(page.locator("#triggers-0"), "watch_folder")).to_contain_text(
        "/root is a system folder: Takt does not watch it (TAKT_WATCH_ROOTS names the folders"
    )
    assert not job.triggers.exists()  # nothing stored
