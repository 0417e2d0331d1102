"""Least privilege in Chromium (docs/security.md, issue 25): a staff user
who may change jobs but not run programs is offered no command kind and no
Command section, sees a command job read-only, and starts nothing with
"Run now" or the job list's action; the message names the permission."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from runs.models import Run
from tests.browser.conftest import password_hash
from tests.browser.pages import job_change_url, job_row, log_in, message, run_action

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EDITOR = ("view_job", "add_job", "change_job", "delete_job", "view_trigger", "add_trigger")


def editor() -> tuple[str, str]:
    from django.contrib.auth.models import Permission, User

    from tests.browser.conftest import OPERATOR

    user = User.objects.create(username="editor", password=password_hash(), is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="takt_jobs", codename__in=EDITOR)
    )
    return "editor", OPERATOR[1]


def test_an_editor_without_run_programs_can_neither_make_nor_run_a_command_job(
    anonymous_page: Page,
) -> None:
    page = anonymous_page
    command = Job.objects.create(name="Disk report", kind="command", command=["df", "-h"])
    log_in(page, *editor())

    page.goto("/admin/takt_jobs/job/add/")
    kinds = page.locator("#id_kind option").evaluate_all("options => options.map(o => o.value)")
    assert "command" not in kinds and "script" not in kinds and "callable" in kinds
    expect(page.locator("#id_command")).to_have_count(0)
    trigger_kinds = page.locator("#id_triggers-__prefix__-kind option").evaluate_all(
        "options => options.map(o => o.value)"
    )
    assert "file" not in trigger_kinds and "cron" in trigger_kinds

    page.goto(job_change_url(command.pk))
    expect(page.get_by_role("heading", name="View job")).to_be_visible()
    expect(page.locator('input[name="_save"]')).to_have_count(0)

    page.goto("/admin/takt_jobs/job/")
    run_action(page, "Run now", job_row(page, "Disk report"))
    expect(message(page, "error")).to_contain_text("Nothing was started: Disk report")
    expect(message(page, "error")).to_contain_text("Can create, change and run command jobs")
    assert not Run.objects.exists()
