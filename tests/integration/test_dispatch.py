"""Claiming due triggers (F-20, F-21, F-24, F-27, F-102, F-11): what
runs.dispatch.claim_due_runs writes to the real database."""

from __future__ import annotations

import pytest

from jobs.models import Trigger
from jobs.services import set_jobs_enabled
from runs.dispatch import claim_due_runs
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run
from tests.integration.conftest import SECOND, hourly, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

# 10:00 in Berlin (summer time); hourly triggers created at 07:30 UTC are due here.
T0 = utc(2026, 6, 1, 8, 0)
CREATED = utc(2026, 6, 1, 7, 30)
HOUR = 3600 * SECOND


def claim(now):
    return claim_due_runs(now=now, limit=100)


def test_only_due_active_triggers_get_a_run_and_next_run_at_moves_on():
    due = make_job("due", params={"colour": "green"}, priority=3)
    due_trigger = hourly(due, created_at=CREATED)
    later = make_job("later")
    later_trigger = make_trigger(
        later,
        created_at=CREATED,
        kind="cron",
        cron_expression="0 12 * * *",
        timezone="Europe/Berlin",
    )
    paused = make_job("trigger disabled")
    paused_trigger = make_trigger(
        paused, created_at=CREATED, kind="cron", cron_expression="0 * * * *", enabled=False
    )

    result = claim(T0)

    run = Run.objects.get()
    assert result.queued == [run.pk] and result.skipped == [] and result.lost_races == 0
    assert (run.job, run.source_trigger, run.trigger, run.status) == (
        due,
        due_trigger,
        RunTrigger.SCHEDULE,
        RunStatus.QUEUED,
    )
    assert (run.scheduled_for, run.enqueued_at, run.published_at) == (T0, T0, None)
    assert (run.priority, run.params, run.missed_count) == (3, {"colour": "green"}, 0)
    due_trigger.refresh_from_db()
    assert (due_trigger.next_run_at, due_trigger.last_fired_at) == (T0 + HOUR, T0)
    for untouched in (later_trigger, paused_trigger):
        before = untouched.next_run_at
        untouched.refresh_from_db()
        assert untouched.next_run_at == before and untouched.last_fired_at is None
    assert later_trigger.next_run_at == utc(2026, 6, 1, 10, 0)


def test_a_second_claim_at_the_same_now_creates_nothing():
    trigger = hourly(make_job(), created_at=CREATED)
    assert claim(T0).claimed == 1

    again = claim(T0)

    assert (again.claimed, again.lost_races) == (0, 0)
    assert Run.objects.count() == 1
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + HOUR


@pytest.mark.parametrize(
    ("offset", "runs"),
    [(-SECOND, 0), (0 * SECOND, 1), (SECOND, 1)],
    ids=["one-second-before", "at-the-instant", "one-second-after"],
)
def test_a_trigger_is_due_exactly_at_next_run_at(offset, runs):
    trigger = hourly(make_job(), created_at=CREATED)
    assert trigger.next_run_at == T0

    claim(T0 + offset)

    assert Run.objects.count() == runs
    trigger.refresh_from_db()
    assert trigger.next_run_at == (T0 + HOUR if runs else T0)
    if runs:
        run = Run.objects.get()
        assert (run.trigger, run.scheduled_for, run.enqueued_at) == (
            RunTrigger.SCHEDULE,
            T0,
            T0 + offset,
        )


@pytest.mark.parametrize("how", ["Job.save", "set_jobs_enabled"])
def test_a_disabled_job_is_skipped_and_caught_up_once_when_re_enabled(how):
    job = make_job()
    trigger = hourly(job, created_at=CREATED)
    job.enabled = False
    job.save()

    for hour in range(4):  # 10:00 to 13:00 Berlin pass while the job is off
        assert claim(T0 + hour * HOUR).claimed == 0
    if how == "Job.save":
        job.enabled = True
        job.save()
    else:
        assert set_jobs_enabled([job.pk], True) == 1
    trigger.refresh_from_db()
    assert trigger.active and trigger.next_run_at == T0  # the old, past time is kept (F-27)

    result = claim(T0 + 3 * HOUR + 30 * 60 * SECOND)

    run = Run.objects.get()
    assert result.queued == [run.pk]
    assert (run.trigger, run.scheduled_for, run.missed_count) == (
        RunTrigger.CATCHUP,
        T0 + 3 * HOUR,
        3,
    )
    trigger.refresh_from_db()
    assert (trigger.next_run_at, trigger.missed_count) == (T0 + 4 * HOUR, 3)
    assert claim(T0 + 3 * HOUR + 31 * 60 * SECOND).claimed == 0


def test_missed_fire_times_give_one_catchup_run_for_the_latest_and_are_counted():
    trigger = hourly(make_job(), created_at=CREATED)

    claim(T0 + 2 * HOUR + 5 * 60 * SECOND)  # 10:00, 11:00 and 12:00 Berlin have passed

    run = Run.objects.get()
    assert (run.trigger, run.scheduled_for, run.missed_count) == (
        RunTrigger.CATCHUP,
        T0 + 2 * HOUR,
        2,
    )
    trigger.refresh_from_db()
    assert (trigger.next_run_at, trigger.missed_count) == (T0 + 3 * HOUR, 2)

    Run.objects.update(status=RunStatus.SUCCEEDED)  # the catch-up ran
    claim(T0 + 5 * HOUR)  # three more fire times: 13:00, 14:00, 15:00 Berlin

    # 15:00 is on time (within the misfire grace), 13:00 and 14:00 were
    # missed: run_once is ONE run for all three, 15:00's (issue 27: before,
    # a catch-up run for 14:00 and a held on-time run for 15:00 both ran).
    newest = Run.objects.exclude(pk=run.pk).order_by("-scheduled_for")
    assert [(r.trigger, r.status, r.scheduled_for, r.missed_count, r.held) for r in newest] == [
        (RunTrigger.CATCHUP, RunStatus.QUEUED, T0 + 5 * HOUR, 2, False)
    ]
    trigger.refresh_from_db()
    assert trigger.missed_count == 4  # 10:00, 11:00, then 13:00, 14:00


def test_a_fixed_rate_interval_keeps_its_phase_after_an_outage():
    trigger = make_trigger(make_job(), created_at=T0, kind="interval", interval_seconds=600)
    assert trigger.next_run_at == T0 + 600 * SECOND

    claim(T0 + 35 * 60 * SECOND)

    run = Run.objects.get()
    assert (run.trigger, run.scheduled_for, run.missed_count) == (
        RunTrigger.CATCHUP,
        T0 + 1800 * SECOND,
        2,
    )
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + 2400 * SECOND


def test_a_once_trigger_fires_once_and_then_never_again():
    trigger = make_trigger(make_job(), created_at=T0, kind="once", run_at=T0 + HOUR)

    claim(T0 + HOUR)

    run = Run.objects.get()
    assert (run.trigger, run.scheduled_for) == (RunTrigger.SCHEDULE, T0 + HOUR)
    trigger.refresh_from_db()
    assert trigger.next_run_at is None and trigger.last_fired_at == T0 + HOUR
    assert claim(T0 + 2 * HOUR).claimed == 0
    assert claim(utc(2030, 1, 1)).claimed == 0
    assert Run.objects.count() == 1


@pytest.mark.parametrize("active_status", [RunStatus.QUEUED, RunStatus.RUNNING])
def test_a_busy_job_gets_a_skipped_run_with_a_message(active_status):
    job = make_job()
    trigger = hourly(job, created_at=CREATED)
    active = create_run(job, trigger=RunTrigger.MANUAL, now=T0 - 60 * SECOND)
    Run.objects.filter(pk=active.pk).update(status=active_status)

    result = claim(T0)

    run = Run.objects.exclude(pk=active.pk).get()
    assert result.skipped == [run.pk] and result.queued == []
    assert (run.trigger, run.status, run.scheduled_for, run.finished_at) == (
        RunTrigger.SCHEDULE,
        RunStatus.SKIPPED,
        T0,
        T0,
    )
    assert run.message == "skipped: the job already has an active run (overlap policy 'skip')"
    trigger.refresh_from_db()
    assert trigger.next_run_at == T0 + HOUR
    assert Run.objects.get(pk=active.pk).status == active_status


def test_dst_spring_forward_fixed_time_runs_once_right_after_the_gap():
    # 02:30 does not exist in Berlin on 2026-03-29: it runs at 03:00 CEST (01:00 UTC).
    trigger = make_trigger(
        make_job(),
        created_at=utc(2026, 3, 28, 12),
        kind="cron",
        cron_expression="30 2 * * *",
        timezone="Europe/Berlin",
    )
    assert trigger.next_run_at == utc(2026, 3, 29, 1, 0)
    assert claim(utc(2026, 3, 29, 0, 59, 59)).claimed == 0

    claim(utc(2026, 3, 29, 1, 0))

    assert Run.objects.get().scheduled_for == utc(2026, 3, 29, 1, 0)
    trigger.refresh_from_db()
    assert trigger.next_run_at == utc(2026, 3, 30, 0, 30)


def test_dst_fall_back_fixed_time_runs_once_and_hourly_runs_in_both_copies():
    fixed_job, hourly_job = make_job("fixed"), make_job("hourly")
    created = utc(2026, 10, 24, 23, 30)  # 01:30 CEST on the night clocks go back
    fixed = make_trigger(
        fixed_job,
        created_at=created,
        kind="cron",
        cron_expression="30 2 * * *",
        timezone="Europe/Berlin",
    )
    hourly(hourly_job, created_at=created)

    for minute in range(0, 4 * 60, 15):  # a beat ticking every 15 minutes until 04:45 CET
        claim(utc(2026, 10, 25, 0, 0) + minute * 60 * SECOND)

    assert list(fixed_job.runs.values_list("scheduled_for", flat=True)) == [
        utc(2026, 10, 25, 0, 30)
    ]
    fixed.refresh_from_db()
    assert fixed.next_run_at == utc(2026, 10, 26, 1, 30)
    hours = list(hourly_job.runs.order_by("scheduled_for").values_list("scheduled_for", "trigger"))
    # 02:00 CEST, 02:00 CET, 03:00 CET, 04:00 CET: real elapsed time, nothing doubled or skipped
    assert hours == [(utc(2026, 10, 25, h), RunTrigger.SCHEDULE) for h in range(4)]


def test_a_limited_claim_takes_the_longest_due_first():
    late = hourly(make_job("due at 10:00"), created_at=CREATED)
    early = make_trigger(
        make_job("due at 09:45"),
        created_at=T0 - 45 * 60 * SECOND,
        kind="interval",
        interval_seconds=1800,
    )
    assert early.next_run_at < late.next_run_at <= T0

    first = claim_due_runs(now=T0, limit=1)

    assert Run.objects.get(pk__in=first.queued).source_trigger == early
    early.refresh_from_db()
    assert early.next_run_at == T0 + 15 * 60 * SECOND
    assert claim_due_runs(now=T0, limit=1).claimed == 1
    assert Run.objects.filter(source_trigger=late).exists()


def test_a_trigger_that_cannot_be_evaluated_is_parked_and_does_not_stall_the_others():
    broken = hourly(make_job("broken"), created_at=CREATED)
    # Stored bypassing validation, as a raw UPDATE or an older release could.
    Trigger.objects.filter(pk=broken.pk).update(cron_expression="not a cron")
    fine = hourly(make_job("fine"), created_at=CREATED)

    result = claim(T0)

    assert [r.source_trigger_id for r in Run.objects.filter(pk__in=result.queued)] == [fine.pk]
    broken.refresh_from_db()
    assert broken.next_run_at is None and not broken.runs.exists()
