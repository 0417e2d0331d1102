"""A schedule that stopped is never silent (F-111, issue 27 item 3): a
trigger that can still fire but has no next fire time and no run that
would set one is found by every beat's tick and by the maintenance,
alerted (critical, naming the job and the trigger), logged in the
decision log and repaired from now. A healthy system raises nothing."""

from __future__ import annotations

import pytest
import time_machine

import runs.tick
from heartbeats.models import Alert
from jobs.models import Job, Trigger
from runs.decisions import query
from runs.maintenance import run_maintenance
from runs.models import RunStatus, RunTrigger
from runs.services import create_run
from runs.stalled import repair_stalled_triggers, stalled_triggers
from runs.tick import run_tick
from tests.integration.conftest import SECOND, hourly, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
NOW = T0 + 10 * 60 * SECOND
HOUR = 3600 * SECOND


@pytest.fixture(autouse=True)
def _check_at_the_next_tick(monkeypatch):
    monkeypatch.setattr(runs.tick, "_stalled_checked_at", float("-inf"))


def break_by_hand(trigger: Trigger) -> None:
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=None)


def tick(at):
    with time_machine.travel(at, tick=False):
        run_tick(now=at)


def healthy_system() -> list[Trigger]:
    """Triggers with no next fire time that are right to have none, and
    ordinary ones: nothing to say about any of them."""
    waiting = make_job("waits for its run")
    anchored = make_trigger(
        waiting, created_at=T0, kind="interval", interval_seconds=60, interval_anchor="from_finish"
    )
    create_run(
        waiting, trigger=RunTrigger.SCHEDULE, now=T0 + 60 * SECOND, source_trigger=anchored
    )  # its own run sets the time
    once = make_job("once, fired")
    fired = make_trigger(once, created_at=T0, kind="once", run_at=T0 + 60 * SECOND)
    Trigger.objects.filter(pk=fired.pk).update(next_run_at=None, last_fired_at=T0 + 60 * SECOND)
    upstream = make_job("upstream")
    after = make_trigger(make_job("after upstream"), created_at=T0, kind="dependency",
                         upstream_job=upstream, upstream_statuses=["succeeded"])  # fmt: skip
    paused = make_job("paused", paused=True)
    break_by_hand(hourly(paused, created_at=T0))  # inactive: resume_job recomputes nothing, F-27
    spent = make_job("run limit reached", max_runs=3)
    Job.objects.filter(pk=spent.pk).update(runs_done=3)
    break_by_hand(hourly(spent, created_at=T0))
    hourly(make_job("plain"), created_at=T0)
    Trigger.objects.filter(pk=anchored.pk).update(next_run_at=None)
    return [anchored, fired, after]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"kind": "cron", "cron_expression": "0 * * * *", "timezone": "Europe/Berlin"},
         T0 + HOUR),
        ({"kind": "interval", "interval_seconds": 60, "interval_anchor": "from_finish"},
         NOW + 60 * SECOND),
        ({"kind": "interval", "interval_seconds": 60, "interval_anchor": "from_start"},
         NOW + 60 * SECOND),
        ({"kind": "interval", "interval_seconds": 60}, NOW + 60 * SECOND),
        # A once trigger that never fired gets its own time back: the beat
        # then catches it up as its missed-run policy says.
        ({"kind": "once", "run_at": T0 + 5 * 60 * SECOND}, T0 + 5 * 60 * SECOND),
    ],
    ids=["cron", "from_finish", "from_start", "fixed_rate", "once"],
)  # fmt: skip
def test_a_trigger_broken_by_hand_is_alerted_logged_and_repaired_by_the_beat(
    fields, expected, redis_client
):
    healthy_system()
    job = make_job("Export")
    trigger = make_trigger(job, created_at=T0, **fields)
    break_by_hand(trigger)

    tick(NOW)

    trigger.refresh_from_db()
    assert trigger.next_run_at == expected
    alert = Alert.objects.get()
    assert (alert.key, alert.severity) == (f"trigger-stalled:{trigger.pk}", "critical")
    assert alert.title == f"Trigger #{trigger.pk} of 'Export' will not fire again"
    assert f"repaired: it fires next at {expected.isoformat()}" in alert.message
    (decision,) = [d for d in query(job_id=job.pk) if d["kind"] == "stalled"]
    assert decision["trigger"] == str(trigger.pk)
    # Repaired: the next look finds nothing, and the alert is not repeated.
    assert repair_stalled_triggers(now=NOW + SECOND) == []
    assert Alert.objects.get().count == 1


def test_a_healthy_system_raises_nothing(redis_client, django_assert_num_queries):
    healthy_system()

    with django_assert_num_queries(1):  # one query, whatever the number of triggers
        assert list(stalled_triggers()) == []
    tick(NOW)

    assert not Alert.objects.exists()
    assert not [d for d in query(limit=1000) if d["kind"] == "stalled"]


def test_the_hourly_maintenance_repairs_them_too_and_a_dry_run_only_counts(redis_client):
    job = make_job("Export")
    trigger = hourly(job, created_at=T0)
    break_by_hand(trigger)

    dry = run_maintenance(now=NOW, only=["schedules"], dry_run=True)
    assert dry.lines() == [
        f"Stalled schedules: would repair 1 trigger that would not fire again"
        f" (#{trigger.pk} of 'Export')"
    ]
    trigger.refresh_from_db()
    assert trigger.next_run_at is None and not Alert.objects.exists()

    report = run_maintenance(now=NOW, only=["schedules"])

    assert report.counts() == {"schedules": {"stalled": 1}}
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + HOUR
    assert Alert.objects.get().severity == "critical"
    assert run_maintenance(now=NOW, only=["schedules"]).lines() == [
        "Stalled schedules: none (every trigger that can fire has a next fire time or a run"
        " to set it)"
    ]


def test_a_trigger_that_cannot_be_evaluated_is_alerted_and_left_alone(redis_client):
    """The beat parks a trigger it cannot evaluate (no next fire time):
    that too is a schedule that stopped."""
    job = make_job("Export")
    trigger = hourly(job, created_at=T0)
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=None, cron_expression="nonsense")

    (found,) = repair_stalled_triggers(now=NOW)

    assert found.next_run_at is None and "cannot be evaluated" in found.error
    alert = Alert.objects.get()
    assert alert.severity == "critical" and "could not be repaired" in alert.message


def test_an_anchored_interval_whose_run_ended_without_setting_it_is_repaired(redis_client):
    """The run that should have set it is over (a crash, a defect): no run
    will set it now."""
    job = make_job("Export")
    trigger = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor="from_finish"
    )
    run = create_run(job, trigger=RunTrigger.SCHEDULE, now=T0 + 60 * SECOND, source_trigger=trigger)
    break_by_hand(trigger)
    assert repair_stalled_triggers(now=NOW) == []  # its run is queued: it will set it
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED)

    (found,) = repair_stalled_triggers(now=NOW)

    assert found.next_run_at == NOW + 60 * SECOND
