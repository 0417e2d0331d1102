"""The engine model's fixtures and its checks that read only the database
(tests/integration/test_engine_model.py drives the steps; see
docs/testing.md, "The engine's model-based test")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from jobs import takt_job
from jobs.core.triggers import iter_fire_times
from jobs.models import Job, ResultVariable, Trigger
from jobs.specs import trigger_spec
from runs.core.messages import MAINTENANCE_REFUSAL
from runs.models import Run, RunStatus, RunTrigger

# The spring and autumn DST changes of Europe/Berlin in 2026 (01:00 UTC).
STARTS = {
    "before spring DST": datetime(2026, 3, 28, 23, 10, tzinfo=UTC),
    "before autumn DST": datetime(2026, 10, 24, 23, 10, tzinfo=UTC),
    "ordinary day": datetime(2026, 6, 1, 7, 40, tzinfo=UTC),
}

# Trigger schedules: cron in Europe/Berlin (hourly, a time in the spring
# gap and the autumn fold, every 20 minutes), intervals, and a once
# trigger 50 minutes after the job (or the edit) was made.
SCHEDULES: dict[str, dict[str, Any]] = {
    "cron hourly": {"kind": "cron", "cron_expression": "0 * * * *"},
    "cron 02:30": {"kind": "cron", "cron_expression": "30 2 * * *"},
    "cron */20": {"kind": "cron", "cron_expression": "*/20 * * * *"},
    "every 25 min": {"kind": "interval", "interval_seconds": 1500},
    "25 min after the end": {
        "kind": "interval",
        "interval_seconds": 1500,
        "interval_anchor": "from_finish",
    },
    "25 min after the start": {
        "kind": "interval",
        "interval_seconds": 1500,
        "interval_anchor": "from_start",
    },
    "once in 50 min": {"kind": "once"},
}
ONCE_AFTER = timedelta(minutes=50)
# Fire times known ahead (the accounting invariant counts them).
FIXED = {"cron hourly", "cron 02:30", "cron */20", "every 25 min", "once in 50 min"}
ANCHORED = {"25 min after the end": "from_finish", "25 min after the start": "from_start"}

ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
BEATS = (RunTrigger.SCHEDULE, RunTrigger.CATCHUP)  # the runs a trigger's fire times make
RETRYABLE = (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)
MISSED_RECORD = "missed fire time(s)"  # the message of a claim's `skipped` record
ACCEPTED = [0]  # the values job 1's condition accepts (F-32)

DEAD_WORKER = "model-dead-worker"

# What the model's job does when a worker runs it: set by the step.
# `probe(run id)` runs first, as the run's code starts (the model checks
# what must hold while a run runs); `inside` runs next.
OUTCOME: dict[str, Any] = {"what": "succeed", "code": 0, "inside": None, "probe": None}


@takt_job("tests.model_step")
def model_step(job: Any) -> str:
    """Ends as the step says; `inside` (a callable) runs while it runs."""
    probe = OUTCOME["probe"]
    if probe is not None:
        probe(job.run_id)
    inside = OUTCOME["inside"]
    if inside is not None:
        OUTCOME["inside"] = None
        inside()
    what = OUTCOME["what"]
    job.set_result_code(OUTCOME["code"])
    if what == "fail":
        job.fail("the model says fail")
    if what == "time out":
        raise SoftTimeLimitExceeded()
    return what


def schedule_fields(name: str, *, now: datetime) -> dict[str, Any]:
    """A trigger's fields for schedule `name`, all the kinds' fields set
    (an edit from one kind to another leaves nothing behind)."""
    fields: dict[str, Any] = {
        "interval_anchor": "fixed_rate",
        "cron_expression": "",
        "interval_seconds": None,
        "run_at": None,
        **SCHEDULES[name],
    }
    if fields["kind"] == "once":
        fields["run_at"] = now + ONCE_AFTER
    return fields


def fire_times_between(trigger: Trigger, first: datetime, bound: datetime | None) -> int:
    """How many fire times of `trigger` lie in [first, bound); bound None:
    all of them (a once trigger that fired)."""
    count = 0
    for fire in iter_fire_times(trigger_spec(trigger), after=first - timedelta(microseconds=1)):
        if bound is not None and fire >= bound:
            break
        count += 1
        if bound is None and count > 1:
            break
    return count


def check_exclusion_of(running: list[Run]) -> None:
    """F-31 over the runs whose code runs now: at most the group's limit of
    one group's runs; an exclusive job's run beside no grouped run and no
    other exclusive run."""
    grouped = [r for r in running if r.job.concurrency_group_id is not None and not r.job.exclusive]
    exclusive = [r for r in running if r.job.exclusive]
    names = [f"run {r.pk} of job {r.job_id}" for r in running]
    by_group: dict[int, int] = {}
    for run in grouped:
        group = run.job.concurrency_group
        by_group[group.pk] = by_group.get(group.pk, 0) + 1
        assert by_group[group.pk] <= group.limit, f"group {group.name} runs {names}"
    assert len(exclusive) <= 1, f"two exclusive runs at once: {names}"
    assert not (exclusive and grouped), f"an exclusive run beside a grouped one: {names}"


def check_retries(job_ids: list[int]) -> None:
    """F-25: a retry follows a failed, timed-out or lost run of its job,
    one per failure, attempt + 1, within max_retries, not before the
    failure; it is never skipped for overlap (only maintenance refuses it;
    its first try met the condition)."""
    retries = Run.objects.filter(job_id__in=job_ids, trigger=RunTrigger.RETRY).select_related(
        "retry_of", "job"
    )
    of: set[int] = set()
    for retry in retries:
        failed = retry.retry_of
        assert failed is not None and failed.job_id == retry.job_id, f"retry {retry.pk} of what?"
        assert failed.pk not in of, f"run {failed.pk} has two retries"
        of.add(failed.pk)
        assert failed.status in RETRYABLE, f"retry {retry.pk} of a run that ended {failed.status}"
        assert retry.attempt == failed.attempt + 1 <= retry.job.max_retries + 1, (
            f"retry {retry.pk}: attempt {retry.attempt} after {failed.attempt}"
            f" (max_retries {retry.job.max_retries})"
        )
        assert failed.finished_at is not None and retry.scheduled_for >= failed.finished_at, (
            f"retry {retry.pk} due {retry.scheduled_for}, before its failure's end"
        )
        if retry.status == RunStatus.SKIPPED:
            assert MAINTENANCE_REFUSAL in retry.message, f"retry {retry.pk}: {retry.message}"


def check_anchored_spacing(trigger: Trigger, anchor: str, *, runs_before: int) -> None:
    """An interval anchored on a run: the beat's runs of one schedule are
    at least N apart, from the start (from_start) or the end (from_finish)
    of the run before — or from the end of one that never started, or of
    the claim that made no run to start (docs/policies.md). Runs made by
    one claim (a skipped record and its run) are not compared. No other
    run of the job (a retry, a manual one) moves the trigger
    (runs/anchored.py)."""
    interval = timedelta(seconds=trigger.interval_seconds or 0)
    runs = list(
        Run.objects.filter(source_trigger=trigger, pk__gt=runs_before, trigger__in=BEATS).order_by(
            "pk"
        )
    )
    for before, after in zip(runs, runs[1:], strict=False):
        if after.enqueued_at == before.enqueued_at:
            continue
        if anchor == "from_start" and before.started_at is not None:
            since = before.started_at
        else:
            since = before.finished_at
        assert since is not None, (
            f"trigger {trigger.pk} ({anchor}) made run {after.pk} while run {before.pk}"
            f" ({before.status}) had neither started nor ended"
        )
        assert after.scheduled_for >= since + interval, (
            f"trigger {trigger.pk} ({anchor}): run {after.pk} due {after.scheduled_for},"
            f" less than {interval} after run {before.pk} ({before.status},"
            f" started {before.started_at}, ended {before.finished_at})"
        )


def condition_unmet(job: Job, *, now: datetime, made_after: int) -> bool:
    """Whether the beat's claim found job's condition unmet (F-32;
    runs/dispatch.py _Load.unmet), from what the model reads after the
    tick: the variable's value (only a run's start or end changes it, and
    a tick starts none), and, with consume, whether a run of the job made
    before the tick waited to start and will consume it."""
    value = ResultVariable.objects.get(pk=job.condition_variable_id).value
    if value not in job.condition_values:
        return True
    return job.condition_consume and (
        Run.objects.filter(
            job=job, status=RunStatus.QUEUED, scheduled_for__lte=now, pk__lte=made_after
        ).exists()
    )
