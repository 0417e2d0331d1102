"""docs/coordination.md's worked example, run through the engine in this
process (each run executed as a worker executes it): the parent "Nightly"
runs its children in order — maintenance on, the import writing its result
variable, the transform whose condition consumes it, maintenance off — and
the on-failure job "Nightly failed" depends on the parent's failure. A good
night and a bad one, with what the doc says of each."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from heartbeats.models import Alert
from jobs import enqueue_job
from jobs.errors import ChildJob, MaintenanceMode
from jobs.models import Job, ResultVariable, Trigger
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import in_maintenance
from runs.services import create_run
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db


def nightly_chain(rows: int) -> dict[str, Any]:
    done = ResultVariable.objects.create(name="Import done")
    nightly = make_job("Nightly", target="takt.children", stop_on_child_failure=False)
    Trigger.objects.create(
        job=nightly, kind="cron", cron_expression="0 2 * * 1-5", timezone="Europe/Berlin"
    )
    children = [
        make_job(
            "Maintenance on",
            target="takt.maintenance_on",
            params={"note": "nightly ERP import"},
            parent=nightly,
            child_order=1,
        ),
        make_job(
            "Import",
            target="tests.erp_import",
            params={"rows": rows},
            result_variable=done,
            parent=nightly,
            child_order=2,
        ),
        make_job(
            "Transform",
            target="tests.erp_transform",
            condition_variable=done,
            condition_values=[0, 200],
            condition_consume=True,
            parent=nightly,
            child_order=3,
        ),
        make_job("Maintenance off", target="takt.maintenance_off", parent=nightly, child_order=4),
    ]
    alert = make_job("Nightly failed", target="tests.echo")
    Trigger.objects.create(
        job=alert, kind="dependency", upstream_job=nightly, upstream_statuses=["failed"]
    )
    report = make_job("Hourly report", target="tests.echo")
    return {
        "done": done,
        "nightly": nightly,
        "children": children,
        "alert": alert,
        "report": report,
    }


def run_the_night(chain: dict[str, Any], capture: Any) -> tuple[Run, dict[str, list[str]]]:
    """The parent's run and each child's run in turn, as workers run them;
    what an operator would see after each child (maintenance on?, the
    variable, whether a normal job may start)."""
    seen: dict[str, list[str]] = {}
    with capture(execute=True):
        parent = create_run(chain["nightly"], trigger=RunTrigger.SCHEDULE, now=timezone.now())
        execute(parent.pk, worker="w")
        while True:
            child = Run.objects.filter(
                cause=parent, job__parent=parent.job, status=RunStatus.QUEUED
            ).first()
            if child is None:
                break
            execute(child.pk, worker="w")
            chain["done"].refresh_from_db()
            try:
                enqueue_job(chain["report"], trigger="manual")
                report = "starts"
            except MaintenanceMode:
                report = "refused"
            seen[child.job.name] = [str(in_maintenance()), str(chain["done"].value), report]
    parent.refresh_from_db()
    return parent, seen


def child_statuses(parent: Run) -> list[tuple[str, str]]:
    children = Run.objects.filter(cause=parent, job__parent=parent.job).order_by("pk")
    return list(children.values_list("job__name", "status"))


def test_a_good_night(redis_client, django_capture_on_commit_callbacks):
    chain = nightly_chain(rows=120)
    parent, seen = run_the_night(chain, django_capture_on_commit_callbacks)

    assert parent.status == RunStatus.SUCCEEDED
    assert parent.message == (
        "children: 'Maintenance on' succeeded, 'Import' succeeded, 'Transform' succeeded,"
        " 'Maintenance off' succeeded"
    )
    # After each child: maintenance mode, the variable, a normal job's start.
    assert seen == {
        "Maintenance on": ["True", "-1", "refused"],
        "Import": ["True", "200", "refused"],
        "Transform": ["True", "-1", "refused"],  # consumed by its start
        "Maintenance off": ["False", "-1", "starts"],
    }
    alert = Alert.objects.get(key="maintenance")
    assert alert.title == "Maintenance mode on" and alert.resolved_at is not None
    assert not Run.objects.filter(job=chain["alert"]).exists()


def test_a_bad_night(redis_client, django_capture_on_commit_callbacks):
    chain = nightly_chain(rows=-1)  # no export: the import fails
    parent, seen = run_the_night(chain, django_capture_on_commit_callbacks)

    assert child_statuses(parent) == [
        ("Maintenance on", "succeeded"),
        ("Import", "failed"),
        ("Transform", "skipped"),
        ("Maintenance off", "succeeded"),
    ]
    transform = Run.objects.get(cause=parent, job__name="Transform")  # recorded, never sent
    assert transform.message == (
        "skipped: condition not met: variable 'Import done' is 1, it must be 0 or 200"
    )
    assert seen["Maintenance off"][0] == "False"  # the window closes whatever happened
    assert parent.status == RunStatus.FAILED
    assert parent.message == (
        "children: 'Maintenance on' succeeded, 'Import' failed, 'Transform' skipped,"
        " 'Maintenance off' succeeded"
    )
    (paged,) = Run.objects.filter(job=chain["alert"])
    assert (paged.trigger, paged.status, paged.cause_id) == ("dependency", "queued", parent.pk)


def test_a_child_is_never_started_from_outside(redis_client):
    nightly_chain(rows=1)
    with pytest.raises(ChildJob, match="start the parent instead"):
        enqueue_job(Job.objects.get(name="Import"), trigger="manual")
