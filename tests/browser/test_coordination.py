"""Concurrency groups and result variables, as an operator sets them up in
a real browser (F-31, F-32, F-90, F-91): a group made with its colour and a
job put in it, then seen in the job list by name and colour; a job given a
condition ("import_status is 0 or 200", consumed) and a result variable; a
variable's value set by hand and shown as set by the operator; and the
Coordination section's bad input refused beside its field, nothing saved."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from jobs.models import ConcurrencyGroup, Job, ResultVariable
from runs.locks import get_redis
from runs.models import Run
from runs.slots import group_key
from tests.browser.pages import (
    JOB_LIST,
    Shot,
    coordination,
    job_change_url,
    job_row,
    message,
    save,
    shown_value,
    times_localized,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GROUPS = "/admin/takt_jobs/concurrencygroup/"
VARIABLES = "/admin/takt_jobs/resultvariable/"


def save_and_continue(page: Page) -> None:
    page.get_by_role("button", name="Save and continue editing").click()


def test_a_group_made_with_its_colour_shows_in_the_job_list(page: Page, shot: Shot) -> None:
    reports = ConcurrencyGroup.objects.create(name="Reports", colour="#2f6fde", limit=3)
    Job.objects.create(name="Invoices", target="takt.hello_world", concurrency_group=reports)
    Job.objects.create(name="Reindex", target="takt.hello_world", exclusive=True)
    Job.objects.create(name="Greeter", target="takt.hello_world")
    Job.objects.create(name="Vacuum", target="takt.hello_world")
    page.goto(GROUPS + "add/")
    page.get_by_label("Name:").fill("Database")
    page.get_by_label("Colour:").fill("#d94f00")
    page.get_by_label("Limit:").fill("2")
    save(page)

    expect(message(page, "success")).to_contain_text("was added successfully")
    row = page.get_by_role("row").filter(has_text="Database")
    expect(row.locator(".takt-swatch")).to_have_css("background-color", "rgb(217, 79, 0)")
    expect(row.locator("td.field-limit")).to_have_text("2")
    expect(row.locator("td.field-job_count")).to_have_text("0")
    expect(row.locator("td.field-holders")).to_have_text("none")

    page.goto(JOB_LIST)
    page.get_by_role("link", name="Vacuum", exact=True).click()
    coordination(page).get_by_label("Concurrency group").select_option(label="Database")
    save(page)

    expect(message(page, "success")).to_contain_text("was changed successfully")
    group = job_row(page, "Vacuum").locator("td.field-group")
    expect(group).to_have_text("Database")
    expect(group.locator(".takt-swatch")).to_have_css("background-color", "rgb(217, 79, 0)")
    expect(job_row(page, "Invoices").locator("td.field-group")).to_have_text("Reports")
    expect(job_row(page, "Reindex").locator("td.field-group")).to_have_text("exclusive")
    expect(job_row(page, "Greeter").locator("td.field-group")).to_have_text("—")
    page.get_by_role("button", name="Toggle navigation").click()  # room for every column
    shot(page, "job-list-group")
    assert Job.objects.get(name="Vacuum").concurrency_group == ConcurrencyGroup.objects.get(
        name="Database"
    )

    # The list's filter, then the groups page's count of jobs, lead to the group's jobs.
    page.locator("#changelist-filter").get_by_role("link", name="Database").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(job_row(page, "Vacuum")).to_be_visible()
    page.goto(GROUPS)
    jobs = page.get_by_role("row").filter(has_text="Reports").locator("td.field-job_count")
    expect(jobs).to_have_text("1")
    jobs.get_by_role("link").click()
    expect(page.locator("#result_list tbody tr")).to_have_count(1)
    expect(job_row(page, "Invoices")).to_be_visible()


def test_a_job_gets_a_condition_and_a_result_variable(page: Page, shot: Shot) -> None:
    ResultVariable.objects.create(name="report_status")
    job = Job.objects.create(name="Report", target="takt.hello_world")
    page.goto(VARIABLES + "add/")
    page.get_by_label("Name:").fill("import_status")
    page.get_by_label("Description:").fill("The import's result code: 0 or 200 when it worked.")
    save(page)
    expect(message(page, "success")).to_contain_text("was added successfully")

    page.goto(job_change_url(job.pk))
    section = coordination(page)
    section.get_by_label("Condition variable").select_option(label="import_status")
    section.get_by_label("Accepted values").fill("0, 200")
    section.get_by_label("Consume the result").check()
    section.get_by_label("Result variable").select_option(label="report_status")
    save_and_continue(page)

    expect(message(page, "success")).to_contain_text("was changed successfully")
    section = coordination(page)
    expect(section.locator("summary")).to_have_text(
        "Coordination — starts when import_status is 0 or 200, consumed · writes report_status"
    )
    shot(page, "job-editor-coordination", element=section)
    job.refresh_from_db()
    assert job.condition_variable is not None and job.condition_variable.name == "import_status"
    assert (job.condition_values, job.condition_consume) == ([0, 200], True)
    assert job.result_variable is not None and job.result_variable.name == "report_status"
    expect(coordination(page).get_by_label("Accepted values")).to_have_value("0, 200")


def test_a_variable_set_by_hand_shows_who_set_it(page: Page, shot: Shot) -> None:
    now = timezone.now()
    export = Job.objects.create(name="Export", target="takt.hello_world")
    run = Run.objects.create(
        job=export, trigger="schedule", status="timed_out", scheduled_for=now, enqueued_at=now
    )
    ResultVariable.objects.create(
        name="export_status", value=-1002, changed_by_run=run.pk, changed_at=now
    )
    variable = ResultVariable.objects.create(
        name="import_status", value=1, changed_by_run=41, changed_at=now
    )
    page.goto(VARIABLES)
    row = page.get_by_role("row").filter(has_text="import_status")
    expect(row.locator("td.field-value_shown")).to_have_text("1")
    expect(row.locator("td.field-set_by")).to_have_text("run #41")  # a run no longer stored
    exported = page.get_by_role("row").filter(has_text="export_status")
    expect(exported.locator("td.field-value_shown")).to_have_text("-1002 (timed out; stopped)")
    expect(exported.locator("td.field-set_by")).to_have_text(f"run #{run.pk} of Export")

    row.get_by_role("link", name="import_status").click()
    page.get_by_label("Value:").fill("200")
    save(page)

    expect(message(page, "success")).to_contain_text("was changed successfully")
    row = page.get_by_role("row").filter(has_text="import_status")
    expect(row.locator("td.field-value_shown")).to_have_text("200")
    expect(row.locator("td.field-set_by")).to_have_text("admin")
    expect(row.locator("td.field-changed time")).to_have_count(1)
    shot(page, "variable-list", element=page.locator("#result_list"))
    variable.refresh_from_db()
    assert (variable.value, variable.changed_by, variable.changed_by_run) == (200, "admin", None)


@pytest.mark.parametrize(
    ("fill", "field", "error"),
    [
        (
            {"Concurrency group": "Database", "Exclusive (global group)": True},
            "exclusive",
            "an exclusive job is in no group (it excludes every group): clear its concurrency"
            " group, or exclusive",
        ),
        (
            {"Accepted values": "0, 200"},
            "condition_variable",
            "accepted values need a variable to compare them with",
        ),
        (
            {"Condition variable": "import_status", "Accepted values": "0, ok"},
            "condition_values",
            "'ok' is not a whole number: give values like 0, 200",
        ),
    ],
)
def test_bad_coordination_is_refused_beside_its_field(
    page: Page, shot: Shot, fill: dict[str, object], field: str, error: str
) -> None:
    ConcurrencyGroup.objects.create(name="Database")
    ResultVariable.objects.create(name="import_status")
    job = Job.objects.create(name="Vacuum", target="takt.hello_world")
    page.goto(job_change_url(job.pk))
    section = coordination(page)
    for label, value in fill.items():
        box = section.get_by_label(label)
        if value is True:
            box.check()
        elif label.endswith(("group", "variable")):
            box.select_option(label=str(value))
        else:
            box.fill(str(value))
    save(page)

    section = coordination(page)  # shown open: it holds an error
    errors = section.locator(f".field-{field} .errorlist")
    expect(errors).to_have_text(error)
    expect(section.get_by_label("Accepted values")).to_have_value(
        str(fill.get("Accepted values", ""))
    )
    if field == "exclusive":
        shot(page, "job-editor-coordination-error", element=section)
    stored = Job.objects.get(pk=job.pk)
    assert (stored.concurrency_group, stored.exclusive, stored.condition_values) == (
        None,
        False,
        [],
    )


def hold_slot(key: str, run: Run, seconds: int = 60) -> None:
    """Put `run` in the slot set `key` as a started run's worker does
    (member its lock token, score its expiry on Redis's clock)."""
    client = get_redis()
    now_s, now_us = client.time()
    client.zadd(key, {f"run-{run.pk}:test": now_s * 1000 + now_us // 1000 + seconds * 1000})


def test_the_groups_page_shows_what_runs_and_what_waits(page: Page, shot: Shot) -> None:
    now = timezone.now().replace(microsecond=0)
    database = ConcurrencyGroup.objects.create(name="Database", colour="#d94f00", limit=1)
    ConcurrencyGroup.objects.create(name="Reports", colour="#2f6fde", limit=3,
                                    description="Invoices and the monthly reports")  # fmt: skip
    vacuum = Job.objects.create(
        name="Vacuum", target="takt.hello_world", concurrency_group=database
    )
    backup = Job.objects.create(
        name="Backup", target="takt.hello_world", concurrency_group=database
    )
    running = Run.objects.create(job=vacuum, trigger="schedule", status="running",
                                 scheduled_for=now, enqueued_at=now, started_at=now)  # fmt: skip
    waiting = Run.objects.create(job=backup, trigger="schedule", status="queued", held=True,
                                 waiting_for="group", scheduled_for=now,
                                 enqueued_at=now + timedelta(seconds=2))  # fmt: skip
    hold_slot(group_key(database.pk), running)

    page.goto(GROUPS)

    row = page.get_by_role("row").filter(has_text="Database")
    expect(row.locator("td.field-holders")).to_have_text(f"run #{running.pk} Vacuum")
    expect(row.locator("td.field-waiting")).to_have_text("1 run")
    reports = page.get_by_role("row").filter(has_text="Reports")
    expect(reports.locator("td.field-holders")).to_have_text("none")
    expect(reports.locator("td.field-waiting")).to_have_text("0")
    expect(page.locator("#takt-exclusive-now")).to_contain_text("running now: none")
    page.get_by_role("button", name="Toggle navigation").click()
    shot(page, "group-list")

    row.locator("td.field-waiting").get_by_role("link").click()

    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    status = rows.first.locator("td.field-status_in_list")
    expect(status.locator(".takt-status-queued")).to_have_text("queued")
    expect(status.locator(".takt-waiting")).to_have_text(
        "held: waiting for a slot of group Database (limit 1)"
    )
    times_localized(page)
    shot(page, "run-list-waiting", element=page.locator("#result_list"))
    rows.first.get_by_role("link", name=f"#{waiting.pk}").click()
    expect(shown_value(page, "waiting")).to_have_text(
        "waiting for a slot of group Database (limit 1). Running now in the group:"
        f" run #{running.pk} Vacuum"
    )
    shot(page, "run-waiting", between=(page.locator("#content-main fieldset").first,
                                       page.locator(".field-waiting")))  # fmt: skip
