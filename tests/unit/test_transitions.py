"""Overlap, retry and job-limit decisions (jobs/core/rules.py, runs/core/admission.py, runs/core/transitions.py): one table
of cases per policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.cron import TriggerError
from jobs.core.rules import (
    JobLimits,
    Overlap,
    OverlapRules,
    RetryRules,
    validate_overlap_rules,
    validate_retry_rules,
)
from runs.core.admission import Admission, StartAction, compute_admission, compute_start_action
from runs.core.transitions import Outcome, compute_backoff, compute_job_after_run, compute_retry

Q, H, S, R = Admission.QUEUE, Admission.HOLD, Admission.SKIP, Admission.REPLACE
T0 = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)
SEC = timedelta(seconds=1)


@pytest.mark.parametrize(
    ("policy", "running", "waiting", "expected"),
    [
        # skip: anything active -> skipped
        ("skip", 0, 0, Q),
        ("skip", 1, 0, S),
        ("skip", 0, 1, S),
        # buffer_one: one waiting run at most, no pile-up
        ("buffer_one", 0, 0, Q),
        ("buffer_one", 1, 0, H),
        ("buffer_one", 1, 1, S),
        ("buffer_one", 0, 1, S),
        # buffer_all: every run waits its turn, up to max_buffered (3 here)
        ("buffer_all", 0, 0, Q),
        ("buffer_all", 1, 0, H),
        ("buffer_all", 0, 1, H),
        ("buffer_all", 1, 2, H),
        ("buffer_all", 1, 3, S),
        # cancel_other: the new run replaces whatever is active
        ("cancel_other", 0, 0, Q),
        ("cancel_other", 1, 0, R),
        ("cancel_other", 0, 2, R),
        # allow: parallel up to max_instances (2 here)
        ("allow", 0, 0, Q),
        ("allow", 1, 0, Q),
        ("allow", 1, 1, S),
        ("allow", 2, 0, S),
    ],
)
def test_admission_of_a_new_run(policy, running, waiting, expected):
    rules = OverlapRules(Overlap(policy), max_instances=2, max_buffered=3)
    decision = compute_admission(rules, running=running, waiting=waiting)
    assert decision.admission is expected
    assert bool(decision.reason) == (expected is S)


@pytest.mark.parametrize(
    ("policy", "action"),
    [
        ("skip", StartAction.SKIP),
        ("buffer_one", StartAction.HOLD),
        ("buffer_all", StartAction.HOLD),
        ("cancel_other", StartAction.TAKE_OVER),
        ("allow", StartAction.SKIP),
    ],
)
def test_what_a_worker_does_when_the_lock_is_taken(policy, action):
    assert compute_start_action(OverlapRules(Overlap(policy))) is action


@pytest.mark.parametrize(
    ("policy", "action"),
    [
        # every run holding a slot has ended: its worker frees it a moment
        # later, so the job is not busy and nothing is skipped for it
        ("skip", StartAction.HOLD),
        ("buffer_one", StartAction.HOLD),
        ("buffer_all", StartAction.HOLD),
        ("cancel_other", StartAction.TAKE_OVER),
        ("allow", StartAction.HOLD),
    ],
)
def test_a_lock_held_only_by_ended_runs_is_waited_for(policy, action):
    assert compute_start_action(OverlapRules(Overlap(policy)), holders_ended=True) is action


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        (OverlapRules(Overlap.ALLOW, max_instances=0), "max_instances"),
        (OverlapRules(Overlap.ALLOW, max_instances=101), "max_instances"),
        (OverlapRules(Overlap.BUFFER_ALL, max_buffered=0), "max_buffered"),
        (OverlapRules("sometimes", 1, 1), "overlap_policy"),  # type: ignore[arg-type]
    ],
)
def test_bad_overlap_rules_name_the_field(rules, field):
    with pytest.raises(TriggerError) as err:
        validate_overlap_rules(rules)
    assert err.value.field == field


# --- retries ------------------------------------------------------------------

RETRY = RetryRules(
    max_retries=3, base=timedelta(seconds=10), factor=2, max_delay=timedelta(seconds=30), jitter=0
)


@pytest.mark.parametrize(
    ("retry", "seconds"),
    [(1, 10), (2, 20), (3, 30), (4, 30), (10, 30)],  # doubling, then the cap
)
def test_backoff_grows_exponentially_up_to_the_cap(retry, seconds):
    assert compute_backoff(RETRY, retry=retry, rand=0.5) == timedelta(seconds=seconds)


def test_jitter_only_ever_shortens_the_delay_by_at_most_its_fraction():
    rules = RetryRules(max_retries=1, base=timedelta(seconds=100), jitter=0.2)
    assert compute_backoff(rules, retry=1, rand=0.0) == timedelta(seconds=100)
    assert compute_backoff(rules, retry=1, rand=0.5) == timedelta(seconds=90)
    assert compute_backoff(rules, retry=1, rand=0.999999) == timedelta(seconds=80)


@pytest.mark.parametrize(
    ("attempt", "outcome", "errors", "next_fire", "retry_in", "dropped"),
    [
        (1, Outcome.FAILED, (), None, 10, False),  # first failure: retry 1 in 10 s
        (2, Outcome.FAILED, (), None, 20, False),
        (3, Outcome.FAILED, (), None, 30, False),
        (4, Outcome.FAILED, (), None, None, False),  # 3 retries used: done
        (1, Outcome.LOST, (), None, 10, False),  # a lost run is retried like a failure
        (1, Outcome.TIMED_OUT, (), None, None, False),  # the timeout beats retries
        (1, Outcome.FAILED, ("builtins.ValueError", "builtins.Exception"), None, None, False),
        (1, Outcome.FAILED, ("app.errors.Flaky", "builtins.Exception"), None, 10, False),
        # the retry would start exactly at the next fire time: dropped
        (1, Outcome.FAILED, (), T0 + 10 * SEC, None, True),
        # one second earlier it still fits
        (1, Outcome.FAILED, (), T0 + 11 * SEC, 10, False),
    ],
)
def test_retry_decisions(attempt, outcome, errors, next_fire, retry_in, dropped):
    rules = RetryRules(
        max_retries=3,
        base=timedelta(seconds=10),
        factor=2,
        max_delay=timedelta(seconds=30),
        jitter=0,
        non_retryable=("ValueError",),
    )
    plan = compute_retry(
        rules,
        attempt=attempt,
        outcome=outcome,
        error_types=errors,
        now=T0,
        next_fire_at=next_fire,
        rand=0.3,
    )
    assert plan.retry_at == (None if retry_in is None else T0 + retry_in * SEC)
    assert plan.dropped is dropped
    assert plan.reason


def test_a_timed_out_run_is_retried_when_the_job_says_so():
    rules = RetryRules(max_retries=1, retry_on_timeout=True, jitter=0)
    plan = compute_retry(
        rules, attempt=1, outcome=Outcome.TIMED_OUT, now=T0, next_fire_at=None, rand=0
    )
    assert plan.retry_at == T0 + 10 * SEC


def test_no_retries_configured_says_so():
    plan = compute_retry(
        RetryRules(), attempt=1, outcome=Outcome.FAILED, now=T0, next_fire_at=None, rand=0
    )
    assert (plan.retry_at, plan.reason) == (None, "no retries configured")


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        (RetryRules(max_retries=-1), "max_retries"),
        (RetryRules(max_retries=101), "max_retries"),
        (RetryRules(base=timedelta(0)), "retry_backoff_s"),
        (RetryRules(factor=0.5), "retry_backoff_factor"),
        (
            RetryRules(base=timedelta(seconds=60), max_delay=timedelta(seconds=59)),
            "retry_backoff_max_s",
        ),
        (RetryRules(jitter=1.5), "retry_jitter"),
        (RetryRules(non_retryable=("Value Error",)), "non_retryable_exceptions"),
    ],
)
def test_bad_retry_rules_name_the_field(rules, field):
    with pytest.raises(TriggerError) as err:
        validate_retry_rules(rules)
    assert err.value.field == field


def test_cap_equal_to_base_is_a_constant_delay():
    rules = RetryRules(base=timedelta(seconds=60), max_delay=timedelta(seconds=60))
    assert validate_retry_rules(rules) is rules


# --- job limits ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "streak", "done", "failed", "expected"),
    [
        (JobLimits(), 0, 0, True, (1, 1, False, False)),
        (JobLimits(), 4, 9, False, (0, 10, False, False)),  # a success resets the streak
        (JobLimits(pause_after_failures=3), 1, 5, True, (2, 6, False, False)),
        (JobLimits(pause_after_failures=3), 2, 5, True, (3, 6, True, False)),  # the 3rd in a row
        (JobLimits(pause_after_failures=3), 2, 5, False, (0, 6, False, False)),
        (JobLimits(max_runs=10), 0, 8, False, (0, 9, False, False)),
        (JobLimits(max_runs=10), 0, 9, False, (0, 10, False, True)),  # the 10th run
        (JobLimits(max_runs=10), 0, 9, True, (1, 10, False, True)),
    ],
)
def test_counters_and_limits_after_a_run(limits, streak, done, failed, expected):
    after = compute_job_after_run(
        limits, consecutive_failures=streak, runs_done=done, failed=failed
    )
    assert (
        after.consecutive_failures,
        after.runs_done,
        bool(after.pause),
        bool(after.disable),
    ) == (expected)
