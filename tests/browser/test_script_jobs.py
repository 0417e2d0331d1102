"""Script jobs in the admin (F-02 `script`, issue 14): a superuser writes a
weekly report script in the syntax-highlighting editor, presses Check (an
error with its line for broken code, then "compiles"), saves, presses Run
now under the editor and reads the script's job.log line in the run's
output. The web server and the worker run with TAKT_SCRIPTS_ENABLED=true
(this module's own `web` and `worker`); in a real browser in New York
against a server in UTC."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from tests.browser.pages import JOB_ADD, Shot, expect_saved, reload_until, run_history
from tests.browser.pages import save as press_save
from tests.live_fixtures import STARTUP_TIMEOUT_S, _answers, wait_until
from tests.processes import Proc, free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPTS_ON = {"TAKT_SCRIPTS_ENABLED": "true"}


@pytest.fixture(scope="module")
def web(live_env: dict[str, str], live_log_dir: Path) -> Iterator[str]:
    """`manage.py runserver` as tests/live_fixtures.py starts it, with script jobs on."""
    port = free_port()
    argv = [
        __import__("sys").executable,
        "manage.py",
        "runserver",
        "--noreload",
        f"127.0.0.1:{port}",
    ]
    proc = Proc("web", argv, {**live_env, **SCRIPTS_ON}, live_log_dir)
    try:
        proc.wait_for("Quit the server with", STARTUP_TIMEOUT_S)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(url), 10, "the web server answers")
        yield url
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def worker(start_process: Callable[..., Proc]) -> Iterator[Proc]:
    """A worker with script jobs on, for the module's tests."""
    proc = start_process("worker", **SCRIPTS_ON)
    yield proc
    proc.stop()


def editor_text(page: Page, text: str) -> None:
    """Replace the script editor's text as typed (ACE's own input)."""
    page.locator(".django-ace-widget .ace_content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)


def test_a_superuser_writes_checks_saves_and_runs_a_script(
    page: Page, worker: object, shot: Shot
) -> None:
    page.goto(JOB_ADD)
    page.get_by_label("Name:", exact=True).fill("Weekly report")
    page.locator("#id_kind").select_option(label="Script (Python source)")
    section = page.locator("fieldset").filter(has_text="Script —")
    section.locator("summary").click()
    editor = section.locator(".django-ace-widget")
    expect(editor).to_be_visible()

    editor_text(page, 'job.log("open requests: " + str(3))\nif job.trigger\n')
    section.get_by_role("button", name="Check").click()
    result = section.locator(".takt-script-result")
    expect(result).to_have_text(re.compile(r"^line 2, column \d+: .+"))
    expect(editor.locator(".ace_gutter-cell.ace_error")).to_have_count(1)  # the line is marked

    editor_text(
        page, "job.log(f\"weekly report: {job.params.get('open', 0)} open ({job.trigger})\")\n"
    )
    section.get_by_role("button", name="Check").click()
    expect(result).to_have_text("compiles")
    expect(editor.locator(".ace_keyword, .ace_identifier").first).to_be_visible()  # highlighted
    press_save(page)

    expect_saved(page, "Weekly report")
    job = Job.objects.get(name="Weekly report")
    assert (job.kind, job.target) == ("script", "")
    assert (
        job.script
        == "job.log(f\"weekly report: {job.params.get('open', 0)} open ({job.trigger})\")\n"
    )

    page.get_by_role("link", name="Weekly report", exact=True).click()
    # Open, not folded, for a script job: a heading, not a summary.
    expect(
        page.get_by_role("heading", name="Script — 1 line of Python", exact=True)
    ).to_be_visible()
    tools = page.locator(".takt-script-tools")
    shot(page, "script-job-editor", element=page.locator("fieldset").filter(has=tools))
    tools.get_by_role("button", name="Run now").click()
    message = page.locator(".messagelist .success")
    expect(message).to_have_text(re.compile(r"Run #\d+ queued\."))
    run_id = re.search(r"#(\d+)", message.inner_text()).group(1)  # type: ignore[union-attr]
    history = run_history(page).filter(has_text=f"#{run_id}")
    reload_until(page, lambda: "succeeded" in history.inner_text(), 30, f"run #{run_id} to end")
    history.get_by_text("output").click()
    expect(history.locator("pre")).to_contain_text("weekly report: 0 open (manual)")
