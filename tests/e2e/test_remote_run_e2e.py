"""`takt.remote_run` (F-42): a job here starts a job of another
installation with a token scoped to it, and ends as that run did. A module
of its own: its worker needs the token in its environment."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs.models import Job
from runs.models import Run
from runs.services import enqueue_job
from tests.e2e.conftest import wait_until
from tests.integration.api_helpers import make_token
from tests.processes import Proc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_job_here_starts_and_waits_for_a_job_of_another_installation(
    web: str, start_process: Callable[..., Proc]
) -> None:
    """`takt.remote_run` (F-42): job A calls "installation B" (here the same
    database behind a web server) with a token scoped to B's job, waits for
    B's run and ends as it did."""
    there = Job.objects.create(
        name="there",
        target="tests.echo",
        api_trigger_permission="token",
        params={"x": 1},
        caller_params=["x"],
    )
    here = Job.objects.create(
        name="here",
        target="takt.remote_run",
        params={
            "url": web,
            "job": there.pk,
            "token_env": "TAKT_REMOTE_B_TOKEN",
            "poll_s": 0.2,
            "params": {"x": 2},
        },
    )
    # The test's web server speaks http:// (a real B would be https://).
    worker = start_process(
        "worker",
        TAKT_REMOTE_B_TOKEN=make_token(job=there, name="from A"),
        TAKT_REMOTE_ALLOW_HTTP="true",
    )
    try:
        check_remote_runs(here, there)
    finally:
        # Stopped here, not at the session's end: a worker left running would
        # take the runs later tests publish.
        worker.stop()


def check_remote_runs(here: Job, there: Job) -> None:
    run = enqueue_job(here)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status not in ("queued", "running"), 30, "A's run ends"
    )
    run.refresh_from_db()
    remote = Run.objects.get(job=there)
    assert run.status == "succeeded", run.message + run.output
    assert remote.status == "succeeded" and remote.params == {"x": 2}
    assert f"remote run #{remote.pk}" in run.output
    assert remote.dedupe_key == f"takt-{run.pk}"
    # A job there that fails makes the run here fail.
    there.target, there.params = "tests.fail", {}
    there.save()
    second = enqueue_job(here)
    wait_until(
        lambda: Run.objects.get(pk=second.pk).status not in ("queued", "running"), 30, "ends"
    )
    second.refresh_from_db()
    assert second.status == "failed" and "ended failed" in second.message
