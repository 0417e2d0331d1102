"""A run's page links to its Celery task in Flower: with a real Flower
beside the web server (TAKT_FLOWER_URL, this module's own `web`) and a real
worker, an operator presses Run now, opens the run's page and follows
"Task in Flower" to Flower's page of the task takt-run-<id>."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from runs.models import Run, RunStatus, task_id_for
from tests.browser.pages import Shot, job_change_url, message, run_change_url
from tests.live_fixtures import STARTUP_TIMEOUT_S, serve_web, wait_until
from tests.processes import Proc, free_port

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def flower(live_env: dict[str, str], live_log_dir: Path) -> Iterator[str]:
    """`celery flower` on the tests' Redis and a free port, as `make run` starts it."""
    port = free_port()
    argv = [sys.executable, "-m", "celery", "-A", "scheduler_project", "flower"]
    argv += ["--address=127.0.0.1", f"--port={port}"]
    proc = Proc("flower", argv, live_env, live_log_dir)
    try:
        proc.wait_for("Visit me at", STARTUP_TIMEOUT_S)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def web(live_env: dict[str, str], live_log_dir: Path, flower: str) -> Iterator[str]:
    """The web server with TAKT_FLOWER_URL set to this module's Flower."""
    with serve_web({**live_env, "TAKT_FLOWER_URL": flower}, live_log_dir) as url:
        yield url


def test_a_runs_page_opens_its_task_in_flower(
    page: Page, flower: str, worker: Proc, shot: Shot
) -> None:
    # Flower turns on the workers' task events every few seconds; a task
    # run before that would be unknown to it.
    worker.wait_for("Events of group {task} enabled by remote", RUN_TIMEOUT_S)
    job = Job.objects.create(name="Greeter", target="takt.hello_world", enabled=False)
    page.goto(job_change_url(job.pk))
    page.get_by_role("button", name="Run now").click()
    run_id = int(re.findall(r"\d+", message(page).inner_text())[0])
    wait_until(
        lambda: Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED).exists(),
        RUN_TIMEOUT_S,
        f"run #{run_id} to succeed",
    )

    page.goto(run_change_url(run_id))
    link = page.get_by_role("link", name="Task in Flower")
    task_url = f"{flower}/task/{task_id_for(run_id)}"
    expect(link).to_have_attribute("href", task_url)
    shot(page, "run-flower-link", element=page.locator(".object-tools"))
    link.click()

    expect(page).to_have_url(task_url)
    task = page.locator("body")
    expect(task).to_contain_text(task_id_for(run_id))
    expect(task).to_contain_text("SUCCESS")
