"""F-66: the "why didn't it run?" checklist, one case per condition."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from jobs.explain import JobFacts, TriggerFacts, explain

NOW = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
DUE = TriggerFacts("every hour", active=True, next_run_at=NOW, allowed_now=True)
READY = JobFacts(
    name="report", enabled=True, scheduler_enabled=True, queue_paused=False, triggers=(DUE,)
)


def test_a_ready_job_has_nothing_holding_it_back():
    answer = explain(READY, now=NOW)
    assert all(c.ok for c in answer.checks)
    assert answer.verdict == "nothing holds the job back"


@pytest.mark.parametrize(
    ("changes", "first_failing"),
    [
        ({"enabled": False}, "enabled"),
        ({"scheduler_enabled": False}, "scheduler on this instance"),
        ({"queue_paused": True, "queue_pause_note": "deploy"}, "queue"),
        ({"paused": True, "pause_note": "db migration"}, "job pause"),
        ({"triggers": ()}, "trigger"),
        ({"triggers": (replace(DUE, active=False),)}, "trigger"),
        ({"triggers": (replace(DUE, allowed_now=False),)}, "weekday and time window"),
        ({"triggers": (replace(DUE, next_run_at=NOW + timedelta(seconds=1)),)}, "due"),
        ({"running": 1}, "overlap"),
        ({"lock_held": True}, "lock"),
    ],
)
def test_the_first_failing_check_is_what_holds_the_job_back(changes, first_failing):
    answer = explain(replace(READY, **changes), now=NOW)
    assert answer.holding_back is not None
    assert answer.holding_back.name == first_failing
    assert answer.verdict.startswith(f"held back by: {first_failing} (")


def test_allow_permits_runs_up_to_max_instances():
    facts = replace(READY, overlap_policy="allow", max_instances=2, running=1, lock_held=True)
    assert explain(facts, now=NOW).holding_back is None
    assert explain(replace(facts, running=2), now=NOW).holding_back.name == "overlap"
