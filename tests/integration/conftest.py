"""Helpers for the integration tests: the real database and the private Redis.

Times are fixed: claims and sweeps take `now=`, and code that reads the
clock (Trigger.save computes next_run_at from it) runs under time-machine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
import time_machine

import runs.dispatch
from jobs.models import Job, Trigger
from runs.tick import run_tick

SECOND = timedelta(seconds=1)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def make_job(name: str = "job", *, target: str = "tests.echo", **fields: Any) -> Job:
    return Job.objects.create(name=name, target=target, **fields)


def running_run(job: Job, *, started_at: datetime, trigger: str = "manual") -> Any:
    """A run `running` since `started_at` on a worker that is gone (no lock
    is taken for it)."""
    from runs.models import Run, RunStatus

    return Run.objects.create(
        job=job,
        trigger=trigger,
        status=RunStatus.RUNNING,
        scheduled_for=started_at,
        enqueued_at=started_at,
        started_at=started_at,
        worker="dead-worker",
    )


def make_trigger(job: Job, *, created_at: datetime, **fields: Any) -> Trigger:
    """A trigger saved at `created_at`, so its first next_run_at is known."""
    with time_machine.travel(created_at, tick=False):
        return Trigger.objects.create(job=job, **fields)


def hourly(job: Job, *, created_at: datetime) -> Trigger:
    """Fires at every full hour (Europe/Berlin, which has whole-hour offsets)."""
    return make_trigger(
        job,
        created_at=created_at,
        kind="cron",
        cron_expression="0 * * * *",
        timezone="Europe/Berlin",
    )


def broker_task_ids(client: redis.Redis) -> list[str]:
    """Celery task ids of the messages waiting in the broker's `takt` queue
    (kombu keeps one Redis list per priority: `takt`, `takt:1` ... `takt:9`)."""
    ids: list[str] = []
    for key in sorted(client.keys("takt*")):
        if client.type(key) == b"list":
            ids += [json.loads(raw)["headers"]["id"] for raw in client.lrange(key, 0, -1)]
    return ids


def clock(*times: datetime) -> Callable[[], datetime]:
    """A clock for runs.execution.execute: returns `times` in order, then
    keeps returning the last one."""
    remaining: Iterator[datetime] = iter(times)
    last = [times[0]]

    def now() -> datetime:
        last[0] = next(remaining, last[0])
        return last[0]

    return now


def job_form_fields(job: Job) -> dict[str, Any]:
    """The job's own fields as the admin change form posts them."""
    data: dict[str, Any] = {
        "name": job.name,
        "description": job.description,
        "kind": job.kind,
        "target": job.target,
        "params": json.dumps(job.params),
        "args": json.dumps(job.args),
        "notify": json.dumps(job.notify),
        "caller_params": json.dumps(job.caller_params),
        "heartbeat_deadline_s": "",
        "owner": "",
        "notes": "",
        "catchup_window_s": "",
        "paused_until": "",
        "pause_after_failures": "",
        "max_runs": "",
    }
    for name in (
        "priority", "queue", "timeout_s", "timeout_action", "overlap_policy", "max_instances",
        "max_buffered", "missed_run_policy", "catchup_pick", "catchup_max_runs", "max_retries",
        "retry_backoff_s", "retry_backoff_factor", "retry_backoff_max_s", "retry_jitter",
        "non_retryable_exceptions", "pause_note", "api_trigger_permission",
    ):  # fmt: skip
        data[name] = getattr(job, name)
    # The Command section (F-02), folded or not, is part of every job's form.
    for name in ("command", "env", "success_codes"):
        data[name] = json.dumps(getattr(job, name))
    data["cwd"], data["nice"], data["result_code_at"] = job.cwd, job.nice, job.result_code_at
    data["child_order"] = job.child_order
    data["condition_values"] = ", ".join(str(v) for v in job.condition_values)
    for relation in ("concurrency_group", "condition_variable", "result_variable", "parent"):
        data[relation] = getattr(job, f"{relation}_id") or ""
    for flag in (
        "enabled", "retry_on_timeout", "exclusive", "condition_consume", "stop_on_child_failure",
        "shell", "detached",
    ):  # fmt: skip
        if getattr(job, flag):
            data[flag] = "on"
    return data


@pytest.fixture(params=["bulk", "row_by_row"])
def claim_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a claim is written: the bulk statements and, after a race
    or on a database without RETURNING from bulk inserts, row by row (a
    test asks for it by name)."""

    if request.param == "row_by_row":

        def bulk(**kwargs: Any) -> Any:
            raise runs.dispatch._RowByRow

        monkeypatch.setattr(runs.dispatch, "_claim_in_bulk", bulk)
    return str(request.param)


def beat_tick(at: datetime) -> float:
    """One beat tick at `at` (the clock travels there too); returns the
    seconds the beat would sleep."""
    with time_machine.travel(at, tick=False):
        return run_tick(now=at)
