"""What an operator does in the admin, as Playwright steps: log in, fill
in a job, add a trigger, type a date, save, reload until something shows.
Fields are found by their labels, buttons and links by role and name."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo

from playwright.sync_api import Locator, Page, expect

BROWSER_TIME_ZONE = "America/New_York"  # the browser's; the server is in UTC
JOB_LIST = "/admin/takt_jobs/job/"
JOB_ADD = "/admin/takt_jobs/job/add/"
RUN_LIST = "/admin/takt_runs/run/"
QUEUE = "/admin/takt_jobs/queuestate/"
OPERATIONS = "/admin/takt_heartbeats/heartbeat/operations/"
TIMELINE = "/admin/takt_jobs/job/timeline/"
FORECAST = "/admin/takt_jobs/job/forecast/"
IMPORT = "/admin/takt_jobs/job/import/"


class Shot(Protocol):
    """The `shot` fixture: a screenshot of the window, one element, the page
    from one element to another, or the whole page, named for
    docs/images/admin/."""

    def __call__(
        self,
        page: Page,
        name: str,
        *,
        element: Locator | None = None,
        full_page: bool = False,
        between: tuple[Locator, Locator] | None = None,
    ) -> Path: ...


def log_in(page: Page, username: str, password: str) -> None:
    """Log in through the admin's login page; returns on the admin index."""
    page.goto("/admin/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def job_change_url(job_id: int) -> str:
    return f"/admin/takt_jobs/job/{job_id}/change/"


def run_change_url(run_id: int) -> str:
    return f"/admin/takt_runs/run/{run_id}/change/"


def fill_job(page: Page, *, name: str, target: str = "takt.hello_world") -> None:
    """On the Add job page: the job's name and target."""
    page.get_by_label("Name:", exact=True).fill(name)
    page.get_by_label("Target").fill(target)


def new_triggers(page: Page) -> Locator:
    """The forms of the triggers being added, in page order (also when a
    save has failed validation and shows them again)."""
    return page.locator(".inline-related.dynamic-triggers")


def add_trigger(page: Page) -> Locator:
    """Press "Add another Trigger"; the new trigger's form."""
    forms = new_triggers(page)
    count = forms.count()
    page.get_by_role("button", name="Add another Trigger").click()
    expect(forms).to_have_count(count + 1)
    return forms.nth(count)


def typed(when: datetime, pattern: str = "%Y-%m-%d %H:%M") -> str:
    """`when` as an operator in New York types it: in the browser's zone,
    which the admin reads a typed time in (jobs/input_zone.py)."""
    return when.astimezone(ZoneInfo(BROWSER_TIME_ZONE)).strftime(pattern)


def fill_datetime(form: Locator, label: str, when: datetime) -> None:
    """Type `when` (in the browser's zone, as the admin reads it) into the
    split date and time field labelled `label` (e.g. "Run at")."""
    widget = (
        form.locator("div", has=form.page.locator("label", has_text=label))
        .locator("p.datetime")
        .first
    )
    widget.get_by_role("textbox").nth(0).fill(typed(when, "%Y-%m-%d"))
    widget.get_by_role("textbox").nth(1).fill(typed(when, "%H:%M:%S"))


def save(page: Page) -> None:
    """Press Save (not "Save and …")."""
    page.get_by_role("button", name="Save", exact=True).click()


def expect_saved(page: Page, name: str) -> None:
    """After Save on an add page: the job list with its success message."""
    added = re.compile(rf"The job “{re.escape(name)} \(#\d+\)” was added successfully")
    expect(page.locator(".messagelist .success")).to_have_text(added)
    expect(page).to_have_url(JOB_LIST)


def job_row(page: Page, name: str) -> Locator:
    """The job list's row of the job called `name`."""
    return page.get_by_role("row").filter(has=page.get_by_role("link", name=name, exact=True))


def run_history(page: Page) -> Locator:
    """The rows of the run history under the job editor (F-51)."""
    history = page.locator("fieldset").filter(
        has=page.get_by_role("heading", name=re.compile(r"^Run history"))
    )
    return history.locator("tbody tr")


def field_errors(form: Locator, field: str) -> Locator:
    """The error list shown at the form row of model field `field`."""
    return form.locator(f".form-row.field-{field} .errorlist, .fieldBox.field-{field} .errorlist")


def reload_until(page: Page, check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Reload `page` every half second until `check()` is true; fail after
    `timeout_s` seconds naming `what`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        page.wait_for_timeout(500)
        page.reload()


def run_action(page: Page, action: str, *rows: Locator) -> None:
    """On a change list: tick `rows`, choose `action` (its label) and press Go."""
    for row in rows:
        row.get_by_role("checkbox").check()
    page.get_by_label("Action:").select_option(label=action)
    page.locator("div.actions").get_by_role("button", name="Go").click()  # not a filter's Go


def confirm_cancel(page: Page, *run_ids: int) -> None:
    """On the page that asks before runs are cancelled (as Django asks
    before a delete): it names `run_ids`; press "Yes, cancel"."""
    expect(page.get_by_role("heading", name="Are you sure?")).to_be_visible()
    for run_id in run_ids:
        expect(page.locator("#takt-cancel-runs")).to_contain_text(f"#{run_id}")
    page.get_by_role("button", name="Yes, cancel").click()


def message(page: Page, level: str = "") -> Locator:
    """The admin's messages after an action; of `level` (success, info,
    warning, error) if given."""
    return page.locator(f".messagelist li.{level}" if level else ".messagelist li")


def times_localized(page: Page) -> None:
    """Wait until takt/admin.js has shown every time on the page in the
    browser's zone."""
    expect(page.locator("time.takt-time:not([data-localized])")).to_have_count(0)


def shown_value(page: Page, field: str) -> Locator:
    """The value of read-only field `field` on a change page (a run's page)."""
    return page.locator(
        f".fieldBox.field-{field} .readonly, .form-row.field-{field}:not(:has(.fieldBox)) .readonly"
    )


def cell_texts(rows: Locator) -> list[list[str]]:
    """The text of each cell of table rows `rows`, as the reader sees it."""
    script = "rows => rows.map(row => Array.from(row.cells, cell => cell.innerText.trim()))"
    return rows.evaluate_all(script)  # type: ignore[no-any-return]


def choose_in_autocomplete(field: Locator, typed: str, option: str | re.Pattern[str]) -> None:
    """In the admin's autocomplete `field` (the form row or box holding it):
    open it, type `typed` into its search box and click the offered
    `option`, as an operator does (Django's select2; its drop-down lives at
    the end of the page)."""
    page = field.page
    field.locator(".select2-selection").click()
    search = page.locator(".select2-container--open .select2-search__field")
    search.fill(typed)
    offered = page.locator(".select2-container--open .select2-results__option")
    offered.filter(has_text=option).first.click()
    expect(page.locator(".select2-container--open")).to_have_count(0)


def coordination(page: Page) -> Locator:
    """The job editor's Coordination section (F-04, F-31, F-32), opened."""
    section = page.locator("fieldset").filter(
        has=page.locator("h2", has_text=re.compile(r"^Coordination"))
    )
    expect(section).to_have_count(1)  # the page is there
    closed = section.locator("details:not([open]) > summary")
    if closed.count():  # collapsed (not when it holds an error)
        closed.click()
    return section
