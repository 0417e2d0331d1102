"""F-101 with F-100: a backfill of interval triggers lists the fire times the
beat fires on (jobs/core/backfill.py). A fixed-rate interval without
start_at keeps the grid through its next_run_at; before issue 27's fix a
backfill listed the range's start + k x N instead, so over a range the beat
had run it made a second run for each fire time, microseconds to minutes
off the beat's keys. Intervals anchored on the enqueue, a run's start or
its end have no grid: backfill lists none of their times, and the command
and the admin's operation refuse a job with no other trigger, naming it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core.management import CommandError, call_command

from runs.backfill import backfill
from runs.models import Run, RunStatus, RunTrigger
from tests.integration.conftest import SECOND, beat_tick, make_job, make_trigger, utc

# Real commits: the beat's decision log goes out after each commit.
pytestmark = pytest.mark.django_db(transaction=True)

T0 = utc(2026, 6, 1, 8, 0)
CREATED = T0 + timedelta(microseconds=123_456)  # the save's clock: the grid has it too
EVERY = 1500 * SECOND
ANCHORED = ["after_enqueue", "from_start", "from_finish"]


def ticks_and_runs(job, *moments):
    """The beat ticks at each moment; the runs it queued then ran."""
    for moment in moments:
        beat_tick(moment)
        job.runs.filter(status=RunStatus.QUEUED).update(status=RunStatus.SUCCEEDED)


@pytest.mark.parametrize("jitter_s", [0, 45])
def test_backfill_over_a_range_the_beat_ran_makes_no_run(jitter_s, claim_path, redis_client):
    job = make_job("export")
    trigger = make_trigger(
        job, created_at=CREATED, kind="interval", interval_seconds=1500, jitter_seconds=jitter_s
    )
    first = CREATED + EVERY
    # On time, 30 s late (on time still), 600 s late (missed: caught up),
    # and between two fire times.
    now = first + 4 * EVERY - 100 * SECOND
    ticks_and_runs(job, first, first + EVERY + 30 * SECOND, first + 2 * EVERY + 600 * SECOND, now)
    beat_keys = sorted(job.runs.values_list("scheduled_for", flat=True))
    assert len(beat_keys) == 4 and (beat_keys[0] - first) <= jitter_s * SECOND
    trigger.refresh_from_db()
    assert trigger.next_run_at == first + 4 * EVERY  # the grid kept its phase

    # From 08:01, a minute after the trigger was saved (its grid, extended
    # back, has a point at 08:00:00.123456: a fire time of the schedule
    # before the trigger existed, which a backfill from 08:00 would run).
    result = backfill(job, start=T0 + 60 * SECOND, end=now, now=now)

    assert result.created == [], "backfill ran fire times the beat had run"
    assert result.already_ran == len(result.fire_times) == 4
    assert sorted(job.runs.values_list("scheduled_for", flat=True)) == beat_keys


def test_after_an_edit_backfill_lists_the_new_grid_the_beat_fires_on(claim_path, redis_client):
    job = make_job("export")
    trigger = make_trigger(job, created_at=CREATED, kind="interval", interval_seconds=1500)
    ticks_and_runs(job, CREATED + EVERY, CREATED + 2 * EVERY)
    edited = CREATED + 2 * EVERY + timedelta(seconds=200, microseconds=654_321)
    trigger.interval_seconds = 1200
    with time_machine.travel(edited, tick=False):
        trigger.save()  # the grid jumps: edited + k x 1200 s
    new = 1200 * SECOND
    now = edited + 3 * new - 5 * SECOND
    ticks_and_runs(job, edited + new, edited + 2 * new + 20 * SECOND, now)
    assert job.runs.filter(scheduled_for__gt=edited).count() == 2

    # A range from a round time after the edit, not on either grid.
    result = backfill(job, start=edited + 60 * SECOND, end=now, now=now)

    assert (result.created, result.already_ran) == ([], 2)
    assert result.fire_times == [edited + new, edited + 2 * new]


@pytest.mark.parametrize("anchor", ANCHORED)
def test_backfill_lists_no_fire_time_of_an_interval_anchored_on_the_enqueue_or_a_run(
    anchor, redis_client, capsys
):
    job = make_job("report")
    trigger = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor=anchor
    )
    ticks_and_runs(job, T0 + 60 * SECOND)
    now = T0 + 600 * SECOND

    result = backfill(job, start=T0, end=now, now=now)

    assert (result.fire_times, result.created) == ([], [])
    [unlisted] = result.unlisted
    assert unlisted.startswith(f"interval_anchor: trigger #{trigger.pk} (every 1 minute")
    assert job.runs.count() == 1
    with pytest.raises(CommandError) as caught:
        call_command("backfill", str(job.pk), "--from", T0.isoformat(), "--to", now.isoformat())
    message = str(caught.value)
    assert message.startswith(f"interval_anchor: trigger #{trigger.pk} (every 1 minute")
    assert f"an interval anchored '{anchor}' has no fire times of its own" in message
    assert job.runs.count() == 1


def test_a_job_with_a_cron_beside_an_anchored_interval_backfills_the_crons_times(capsys):
    job = make_job("report")
    make_trigger(job, created_at=T0, kind="cron", cron_expression="0 * * * *", timezone="UTC")
    anchored = make_trigger(
        job, created_at=T0, kind="interval", interval_seconds=60, interval_anchor="from_finish"
    )
    with time_machine.travel(T0 + 3 * 3600 * SECOND, tick=False):
        call_command("backfill", str(job.pk), "--from", T0.isoformat(),
                     "--to", (T0 + 3600 * SECOND).isoformat(), "--dry-run")  # fmt: skip
    out = capsys.readouterr().out
    assert f"not listed: interval_anchor: trigger #{anchored.pk} " in out
    assert "2 fire time(s) in the range; 0 already have a run" in out
    assert not Run.objects.filter(trigger=RunTrigger.CATCHUP).exists()
