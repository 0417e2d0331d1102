"""The run-level decisions after a run ends, as pure functions (F-25,
F-26, F-103, F-104): whether and when a failed, timed-out or lost run is
retried, and what a run's end does to its job (the failure streak, the
automatic pause, the run limit). Part of the pure core: stdlib only, no
Django, no Celery, no clock reads; callers pass the facts and `now`.
Admission (F-23) is runs/core/admission.py; the rules themselves are
jobs/core/rules.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from jobs.core.rules import JobLimits, RetryRules

# --- retries (F-25, F-103) --------------------------------------------------


class Outcome(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"


@dataclass(frozen=True)
class RetryPlan:
    retry_at: datetime | None  # None: no retry
    reason: str  # why not, or "retry k of n in d"
    dropped: bool = False  # a retry was due but would run into the next fire time


def compute_retry(
    rules: RetryRules,
    *,
    attempt: int,
    outcome: Outcome,
    error_types: tuple[str, ...] = (),
    now: datetime,
    next_fire_at: datetime | None,
    rand: float,
) -> RetryPlan:
    """Decide whether the run that just ended (`attempt`, 1 for the first
    try) is retried, and when. `error_types`: the dotted names of the
    exception's class and its bases (empty for job.fail() and timeouts).
    `next_fire_at`: the job's next scheduled fire time; a retry at or after
    it is dropped and counted instead (F-103: a retry never runs into the
    next scheduled run). `rand` in [0, 1) drives the jitter."""
    retries_used = attempt - 1
    if retries_used >= rules.max_retries:
        if rules.max_retries == 0:
            return RetryPlan(None, "no retries configured")
        return RetryPlan(None, f"no retries left ({rules.max_retries} of {rules.max_retries} used)")
    if outcome is Outcome.TIMED_OUT and not rules.retry_on_timeout:
        return RetryPlan(None, "timed out: not retried (the job does not retry after a timeout)")
    blocked = _non_retryable(rules.non_retryable, error_types)
    if blocked:
        return RetryPlan(None, f"{blocked} is not retryable")
    delay = compute_backoff(rules, retry=retries_used + 1, rand=rand)
    retry_at = now + delay
    if next_fire_at is not None and retry_at >= next_fire_at:
        return RetryPlan(
            None,
            f"retry {retries_used + 1} dropped: it would start at or after the next"
            f" scheduled run ({next_fire_at.isoformat()})",
            dropped=True,
        )
    return RetryPlan(
        retry_at,
        f"retry {retries_used + 1} of {rules.max_retries} in {delay.total_seconds():g} s",
    )


def compute_backoff(rules: RetryRules, *, retry: int, rand: float) -> timedelta:
    """The delay before retry number `retry` (1-based), jitter applied."""
    raw = rules.base.total_seconds() * rules.factor ** (retry - 1)
    capped = min(raw, rules.max_delay.total_seconds())
    jittered = capped * (1 - rules.jitter * min(max(rand, 0.0), 1.0))
    return timedelta(seconds=round(jittered, 3))


def _non_retryable(names: tuple[str, ...], error_types: tuple[str, ...]) -> str:
    for dotted in error_types:
        short = dotted.rsplit(".", 1)[-1]
        if dotted in names or short in names:
            return dotted
    return ""


# --- a run's end and its job (F-104) ---------------------------------------


@dataclass(frozen=True)
class JobAfterRun:
    consecutive_failures: int
    runs_done: int
    pause: str = ""  # a note: pause the job with it
    disable: str = ""  # a note: disable the job with it


def compute_job_after_run(
    limits: JobLimits, *, consecutive_failures: int, runs_done: int, failed: bool
) -> JobAfterRun:
    """The job's counters after one of its runs ended, and whether the job
    pauses itself (N consecutive failures) or disables itself (run limit)."""
    streak = consecutive_failures + 1 if failed else 0
    done = runs_done + 1
    pause = disable = ""
    if failed and limits.pause_after_failures and streak >= limits.pause_after_failures:
        pause = f"paused automatically after {streak} consecutive failed runs"
    if limits.max_runs and done >= limits.max_runs:
        disable = f"disabled automatically: reached its limit of {limits.max_runs} runs"
    return JobAfterRun(streak, done, pause, disable)
