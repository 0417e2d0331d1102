"""The run-level decisions, as pure functions (F-23, F-25, F-26, F-103,
F-104): what happens to a new run when its job is busy, what a worker does
when the job's lock is taken, whether and when a failed run is retried, and
what a run's end does to its job. Part of the pure core: stdlib only, no
Django, no Celery, no clock reads; callers pass the facts and `now`.

The same functions decide for every source of a run (schedule, catch-up,
retry, "Run now", `enqueue_job()`, backfill): the callers in
runs/services.py, runs/dispatch.py and runs/execution.py only apply the
answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from jobs.cron import TriggerError

MAX_INSTANCES = 100
MAX_BUFFERED = 1000
MAX_RETRIES = 100


class Overlap(StrEnum):
    """Overlap policies (F-23); the values are those stored on the job."""

    # While the job has an active run, a new one is recorded `skipped`.
    SKIP = "skip"
    # Keep one waiting run; it starts when the current run ends. More are skipped.
    BUFFER_ONE = "buffer_one"
    # Keep every new run waiting, in order, up to `max_buffered`; more are skipped.
    BUFFER_ALL = "buffer_all"
    # The new run replaces the active ones: they are cancelled (a running one is stopped).
    CANCEL_OTHER = "cancel_other"
    # Runs go in parallel, up to `max_instances` at once; more are skipped.
    ALLOW = "allow"


class Admission(StrEnum):
    """What to do with a new run."""

    QUEUE = "queue"  # send it to the workers now
    HOLD = "hold"  # keep it queued but unsent; the run ahead of it sends it when it ends
    SKIP = "skip"  # record it `skipped`
    REPLACE = "replace"  # send it, and cancel the job's other active runs


@dataclass(frozen=True)
class OverlapRules:
    policy: Overlap = Overlap.SKIP
    max_instances: int = 1  # `allow` only
    max_buffered: int = 10  # `buffer_all` only


@dataclass(frozen=True)
class Decision:
    admission: Admission
    reason: str = ""  # for a skip: the message the skipped run carries


def compute_admission(rules: OverlapRules, *, running: int, waiting: int) -> Decision:
    """Decide for a new run that is due now. `running`: the job's runs that
    are running; `waiting`: its runs that are queued and due (sent or held).
    A run for a later time (run_at, a retry's delay) is decided when it
    becomes due, not before."""
    active = running + waiting
    policy = rules.policy
    if policy is Overlap.SKIP:
        if active:
            return Decision(
                Admission.SKIP, "the job already has an active run (overlap policy 'skip')"
            )
        return Decision(Admission.QUEUE)
    if policy is Overlap.BUFFER_ONE:
        if waiting:
            return Decision(
                Admission.SKIP, "a run of the job is already waiting (overlap policy 'buffer_one')"
            )
        return Decision(Admission.HOLD if running else Admission.QUEUE)
    if policy is Overlap.BUFFER_ALL:
        if waiting >= rules.max_buffered:
            return Decision(
                Admission.SKIP,
                f"{waiting} runs of the job are already waiting, the most overlap policy"
                f" 'buffer_all' keeps (max_buffered = {rules.max_buffered})",
            )
        return Decision(Admission.HOLD if active else Admission.QUEUE)
    if policy is Overlap.CANCEL_OTHER:
        return Decision(Admission.REPLACE if active else Admission.QUEUE)
    if policy is Overlap.ALLOW:
        if active >= rules.max_instances:
            return Decision(
                Admission.SKIP,
                f"the job already has {active} active runs, the most overlap policy 'allow'"
                f" permits (max_instances = {rules.max_instances})",
            )
        return Decision(Admission.QUEUE)
    raise ValueError(f"unknown overlap policy {policy!r}")


class StartAction(StrEnum):
    """What a worker does with a run whose job lock it could not take."""

    SKIP = "skip"  # end the run `skipped`
    HOLD = "hold"  # put it back to wait; the lock holder sends it when it ends
    TAKE_OVER = "take_over"  # cancel the holder's run and take the lock from it


def compute_start_action(rules: OverlapRules) -> StartAction:
    """The worker's answer when every lock slot of the job is taken (the
    second check of F-23, for runs that got past the first one in a race).
    With `allow`, the job has `max_instances` slots; the others have one."""
    if rules.policy in (Overlap.BUFFER_ONE, Overlap.BUFFER_ALL):
        return StartAction.HOLD
    if rules.policy is Overlap.CANCEL_OTHER:
        return StartAction.TAKE_OVER
    return StartAction.SKIP


def validate_overlap_rules(rules: OverlapRules) -> OverlapRules:
    """Raises TriggerError naming the field."""
    if rules.policy not in Overlap.__members__.values():
        raise TriggerError("overlap_policy", f"unknown overlap policy {rules.policy!r}")
    if not 1 <= rules.max_instances <= MAX_INSTANCES:
        raise TriggerError("max_instances", f"must be between 1 and {MAX_INSTANCES}")
    if not 1 <= rules.max_buffered <= MAX_BUFFERED:
        raise TriggerError("max_buffered", f"must be between 1 and {MAX_BUFFERED}")
    return rules


# --- retries (F-25, F-103) --------------------------------------------------


class Outcome(StrEnum):
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"


@dataclass(frozen=True)
class RetryRules:
    """A job's retry policy. Delay before retry k (k = 1, 2, …) is
    min(max_delay, base * factor ** (k - 1)), shortened by up to `jitter`
    (a fraction, 0 to 1) of itself at random."""

    max_retries: int = 0
    base: timedelta = timedelta(seconds=10)
    factor: float = 2.0
    max_delay: timedelta = timedelta(hours=1)
    jitter: float = 0.1
    # A run that timed out is retried only if this is set: by default the
    # timeout beats retries (a run that hangs would hang again).
    retry_on_timeout: bool = False
    # Exception type names (the class name or its dotted path) never retried.
    non_retryable: tuple[str, ...] = ()


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


def validate_retry_rules(rules: RetryRules) -> RetryRules:
    """Raises TriggerError naming the job field."""
    if not 0 <= rules.max_retries <= MAX_RETRIES:
        raise TriggerError("max_retries", f"must be between 0 and {MAX_RETRIES}")
    if rules.base <= timedelta(0):
        raise TriggerError("retry_backoff_s", "must be at least 1 second")
    if rules.factor < 1:
        raise TriggerError("retry_backoff_factor", "must be 1 or more (1 = a constant delay)")
    if rules.max_delay < rules.base:
        raise TriggerError(
            "retry_backoff_max_s",
            f"the cap ({rules.max_delay.total_seconds():g} s) is below the base delay"
            f" ({rules.base.total_seconds():g} s)",
        )
    if not 0 <= rules.jitter <= 1:
        raise TriggerError("retry_jitter", "must be a fraction from 0 to 1")
    for name in rules.non_retryable:
        if not name.replace(".", "").replace("_", "").isalnum():
            raise TriggerError(
                "non_retryable_exceptions", f"{name!r} is not an exception class name"
            )
    return rules


# --- a run's end and its job (F-104) ---------------------------------------


@dataclass(frozen=True)
class JobLimits:
    pause_after_failures: int | None = None  # pause the job after N failures in a row
    max_runs: int | None = None  # disable the job after N runs


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
