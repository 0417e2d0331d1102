"""A job's run policies as rules (F-23, F-25, F-103, F-104): the overlap
policy, the retry policy and the job's limits, with the checks that the
admin, the API and the commands share (each raises TriggerError naming the
job's field). The decisions that apply them are in runs/core. Pure core:
stdlib only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from jobs.core.cron import TriggerError, gettext_noop

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


@dataclass(frozen=True)
class OverlapRules:
    policy: Overlap = Overlap.SKIP
    max_instances: int = 1  # `allow` only
    max_buffered: int = 10  # `buffer_all` only


def validate_overlap_rules(rules: OverlapRules) -> OverlapRules:
    """Raises TriggerError naming the field."""
    if rules.policy not in Overlap.__members__.values():
        raise TriggerError(
            "overlap_policy", gettext_noop("unknown overlap policy %(policy)r"), policy=rules.policy
        )
    if not 1 <= rules.max_instances <= MAX_INSTANCES:
        raise TriggerError(
            "max_instances",
            gettext_noop("must be between 1 and %(max_instances)s"),
            max_instances=MAX_INSTANCES,
        )
    if not 1 <= rules.max_buffered <= MAX_BUFFERED:
        raise TriggerError(
            "max_buffered",
            gettext_noop("must be between 1 and %(max_buffered)s"),
            max_buffered=MAX_BUFFERED,
        )
    return rules


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


def validate_retry_rules(rules: RetryRules) -> RetryRules:
    """Raises TriggerError naming the job field."""
    if not 0 <= rules.max_retries <= MAX_RETRIES:
        raise TriggerError(
            "max_retries",
            gettext_noop("must be between 0 and %(max_retries)s"),
            max_retries=MAX_RETRIES,
        )
    if rules.base <= timedelta(0):
        raise TriggerError("retry_backoff_s", gettext_noop("must be at least 1 second"))
    if rules.factor < 1:
        raise TriggerError(
            "retry_backoff_factor", gettext_noop("must be 1 or more (1 = a constant delay)")
        )
    if rules.max_delay < rules.base:
        raise TriggerError(
            "retry_backoff_max_s",
            gettext_noop("the cap (%(cap)s s) is below the base delay (%(base)s s)"),
            cap=format(rules.max_delay.total_seconds(), "g"),
            base=format(rules.base.total_seconds(), "g"),
        )
    if not 0 <= rules.jitter <= 1:
        raise TriggerError("retry_jitter", gettext_noop("must be a fraction from 0 to 1"))
    for name in rules.non_retryable:
        if not name.replace(".", "").replace("_", "").isalnum():
            raise TriggerError(
                "non_retryable_exceptions",
                gettext_noop("%(name)r is not an exception class name"),
                name=name,
            )
    return rules


@dataclass(frozen=True)
class JobLimits:
    pause_after_failures: int | None = None  # pause the job after N failures in a row
    max_runs: int | None = None  # disable the job after N runs
