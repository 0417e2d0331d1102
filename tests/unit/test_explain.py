"""F-66: the "why didn't it run?" checklist, one case per condition."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from heartbeats.core.explain import BeatFacts, JobFacts, RunFacts, TriggerFacts, explain

NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=10)
SOON = TriggerFacts("every hour", enabled=True, next_run_at=LATER, allowed_now=True)
BEAT = BeatFacts("beat@a", scheduler_enabled=True)
READY = JobFacts(name="report", enabled=True, triggers=(SOON,), beats=(BEAT,), workers=1)


def utc(moment: datetime) -> str:
    return moment.strftime("%H:%M:%S")


def running(run_id: int = 12, *, lock_alive: bool = True, since: datetime = NOW) -> RunFacts:
    return RunFacts(run_id, "running", since, worker="celery@w1", lock_alive=lock_alive)


def test_a_healthy_job_says_when_it_runs_next():
    answer = explain(READY, now=NOW)
    assert all(c.ok for c in answer.checks), answer.checks
    assert answer.verdict(utc) == "nothing holds it back: it runs next at 08:10:00"
    assert answer.blocking_run_id is None


@pytest.mark.parametrize(
    ("changes", "first_failing", "words"),
    [
        ({"enabled": False}, "enabled", "the job is disabled; Run now still works"),
        (
            {"enabled": False, "max_runs": 30, "runs_done": 30},
            "enabled",
            "disabled: it reached its run limit of 30 runs",
        ),
        ({"beats": ()}, "beat", "no live beat: nothing is dispatched by schedule"),
        (
            {"beats": (replace(BEAT, scheduler_enabled=False), BeatFacts("beat@b", False))},
            "scheduler switch",
            "every live beat has its scheduler switched off (TAKT_SCHEDULER_ENABLED=false): beat@a, beat@b",
        ),
        (
            {"queue_paused": True, "queue_pause_note": "deploy"},
            "queue",
            "the queue is paused: deploy",
        ),
        (
            {"queue_paused": True, "queue_paused_until": LATER},
            "queue",
            "the queue is paused; it resumes by itself at 08:10:00",
        ),
        ({"maintenance": True}, "maintenance", "maintenance mode is on: only jobs allowed"),
        ({"paused": True, "pause_note": "db migration"}, "job pause", "paused: db migration"),
        ({"triggers": ()}, "trigger", "no enabled trigger"),
        ({"triggers": (replace(SOON, enabled=False),)}, "trigger", "no enabled trigger"),
        (
            {"triggers": (replace(SOON, allowed_now=False),)},
            "weekday and time window",
            "now is outside every trigger's weekdays, time window or excluded days; next fire time 08:10:00",
        ),
        ({"triggers": (replace(SOON, next_run_at=None),)}, "next fire time", "none"),
        (
            {"triggers": (replace(SOON, next_run_at=NOW - timedelta(minutes=3)),)},
            "next fire time",
            "overdue: due since this time but not dispatched",
        ),
        (
            {"active_runs": (running(lock_alive=False, since=NOW - timedelta(hours=1)),)},
            "active runs",
            "run #12 is running on celery@w1; its worker is gone (its lock lapsed): it is recovered"
            " as lost; the next fire time is recorded as skipped; running since 07:00:00",
        ),
        (
            {"active_runs": (running(),), "lock_holders": (12,)},
            "active runs",
            "run #12 is running on celery@w1; the next fire time is recorded as skipped",
        ),
        (
            {"active_runs": (RunFacts(7, "queued", NOW - timedelta(minutes=5)),)},
            "active runs",
            "run #7 is queued; no worker has started it",
        ),
        ({"workers": 0}, "worker", "no live worker"),
        ({"lock_holders": (99,)}, "lock", "held by run #99, which is not running"),
    ],
)
def test_the_first_failing_check_is_what_holds_the_job_back(changes, first_failing, words):
    answer = explain(replace(READY, **changes), now=NOW)
    assert answer.holding_back is not None, answer.checks
    assert answer.holding_back.name == first_failing
    assert words in answer.holding_back.text(utc)
    assert answer.verdict(utc).startswith(f"held back by: {first_failing} (")


def test_a_disabled_job_with_an_enabled_trigger_is_not_said_to_have_no_trigger():
    answer = explain(replace(READY, enabled=False), now=NOW)
    trigger = next(c for c in answer.checks if c.name == "trigger")
    assert trigger.ok and trigger.detail == "1 enabled: every hour"


def test_a_stuck_run_is_named_so_that_it_can_be_cancelled():
    stuck = running(run_id=41, lock_alive=False)
    assert explain(replace(READY, active_runs=(stuck,)), now=NOW).blocking_run_id == 41


def test_maintenance_lets_an_allowed_job_through():
    facts = replace(READY, maintenance=True, allowed_during_maintenance=True)
    answer = explain(facts, now=NOW)
    assert answer.holding_back is None
    assert "allowed during it" in next(c for c in answer.checks if c.name == "maintenance").detail


def test_one_beat_with_the_scheduler_on_is_enough():
    facts = replace(READY, beats=(BEAT, BeatFacts("beat@b", False)))
    answer = explain(facts, now=NOW)
    assert answer.holding_back is None
    switch = next(c for c in answer.checks if c.name == "scheduler switch")
    assert switch.detail == "on in beat@a; off in beat@b"


def test_unknown_facts_are_left_out():
    answer = explain(replace(READY, beats=None, workers=None), now=NOW)
    assert {c.name for c in answer.checks}.isdisjoint({"beat", "scheduler switch", "worker"})


def test_allow_permits_runs_up_to_max_instances():
    facts = replace(
        READY, overlap_policy="allow", max_instances=2, active_runs=(running(),), lock_holders=(12,)
    )
    assert explain(facts, now=NOW).holding_back is None
    two = replace(facts, active_runs=(running(), running(13)), lock_holders=(12, 13))
    assert explain(two, now=NOW).holding_back.name == "active runs"


def test_a_due_fire_time_within_two_polls_is_due_now_not_overdue():
    facts = replace(READY, triggers=(replace(SOON, next_run_at=NOW - timedelta(seconds=6)),))
    answer = explain(facts, now=NOW)
    assert answer.holding_back is None
    assert next(c for c in answer.checks if c.name == "next fire time").detail == "due now"


def test_a_run_that_just_started_is_not_said_to_have_lost_its_worker():
    """Between a run's start and its taking the job's lock there is a moment
    without a lock: only a lock missing for longer than its lease counts."""
    fresh = running(lock_alive=False, since=NOW - timedelta(seconds=2))
    answer = explain(replace(READY, active_runs=(fresh,), lock_ttl_s=30), now=NOW)
    assert "worker is gone" not in answer.holding_back.detail
    stale = running(lock_alive=False, since=NOW - timedelta(seconds=31))
    answer = explain(replace(READY, active_runs=(stale,), lock_ttl_s=30), now=NOW)
    assert "worker is gone" in answer.holding_back.detail
