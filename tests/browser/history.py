"""The state the admin pages show, made through Takt's services as the
scheduler and the workers make it (no hand-edited rows): runs that
started and ended at given times, and the process heartbeats of beats and
workers (heartbeats.processes)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from heartbeats.processes import beat_detail, report_process, worker_detail
from jobs.models import Job
from runs.ending import finish_run
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, save_output, start_run

WORKER = "celery@host-a"


def past_run(
    job: Job,
    *,
    started_at: datetime,
    duration_s: float = 1.0,
    status: str = RunStatus.SUCCEEDED,
    output: str = "",
    message: str = "",
    trigger: str = RunTrigger.MANUAL,
) -> Run:
    """A run of `job` that a worker started at `started_at` (aware) and that
    ended `status` `duration_s` seconds later; `status` RUNNING leaves it
    running, QUEUED waiting (unpublished: no worker gets it), SKIPPED
    records it skipped when it was due. The job's
    heartbeat and alerts follow from its end, as after a real run."""
    run = create_run(job, trigger=trigger, now=started_at)
    if status == RunStatus.QUEUED:
        return run
    if status == RunStatus.SKIPPED:
        finish_run(
            run, status=status, from_status=RunStatus.QUEUED, now=started_at, message=message
        )
        return run
    assert start_run(run, worker=WORKER, now=started_at)
    if output:
        save_output(run.pk, output)
    if status != RunStatus.RUNNING:
        ended_at = started_at + timedelta(seconds=duration_s)
        finish_run(run, status=status, now=ended_at, message=message, output=output or None)
    return Run.objects.get(pk=run.pk)


def report_beat(name: str = "beat@host-a", *, scheduler: bool = True) -> None:
    """A beat's process heartbeat, now, with its scheduler switch."""
    report_process(name, now=timezone.now(), detail=beat_detail(scheduler))


def report_worker(name: str = f"worker:{WORKER}", *, concurrency: int = 4) -> None:
    """A worker's process heartbeat, now, with its pool size."""
    report_process(name, now=timezone.now(), detail=worker_detail(concurrency, ["takt"]))
