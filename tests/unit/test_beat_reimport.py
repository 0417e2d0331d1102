"""jobs.core.beat_reimport: a re-import's `enabled` and whether a
PeriodicTask may be switched off, as a table (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.beat_reimport import Prior, compute_hold, known_task, settle
from jobs.core.celery_beat import BeatTask, Crontab, Interval, translate

NOW = datetime(2027, 3, 10, 9, 0, 30, tzinfo=UTC)
DAILY = Crontab("0", "3", "*", "*", "*", "UTC", frozenset(range(7)), frozenset(range(1, 32)))
NOT_REGISTERED = "its task 'x.task' is not registered in this project"


def settled(*, enabled: bool = True, registered: bool = True, prior: Prior | None = None):
    translation = translate(BeatTask(1, "t", "x.task", DAILY, enabled=enabled), now=NOW)
    settle(translation, registered=registered, prior=prior)
    assert translation.definition is not None
    return translation.definition["enabled"], translation.enabled_set, translation.hold


@pytest.mark.parametrize(
    ("source", "registered", "prior", "expected"),
    [
        # new job: what the task wants, recorded
        (True, True, None, (True, True, None)),
        (True, False, None, (False, False, NOT_REGISTERED)),
        # untouched since the last import: follows the task
        (True, True, Prior(enabled=False, enabled_set=False), (True, True, None)),
        (
            False,
            True,
            Prior(enabled=True, enabled_set=True),
            (False, False, "disabled in django-celery-beat"),
        ),
        (True, False, Prior(enabled=True, enabled_set=True), (False, False, NOT_REGISTERED)),
        # changed in Takt since: kept, and the record too
        (
            True,
            True,
            Prior(enabled=False, enabled_set=True),
            (False, True, "its Takt job was disabled in Takt after the last import"),
        ),
        (False, True, Prior(enabled=True, enabled_set=False), (True, False, None)),
        # no import recorded setting it: kept, nothing recorded
        (True, True, Prior(enabled=True, enabled_set=None), (True, None, None)),
        (
            True,
            True,
            Prior(enabled=False, enabled_set=None),
            (
                False,
                None,
                "its Takt job is disabled, and no import recorded setting that: enable it in Takt",
            ),
        ),
        # enabled in Takt, but nothing here to run it
        (True, False, Prior(enabled=True, enabled_set=None), (True, None, NOT_REGISTERED)),
    ],
)
def test_enabled_on_a_reimport(source, registered, prior, expected):
    assert settled(enabled=source, registered=registered, prior=prior) == expected


@pytest.mark.parametrize(
    ("paused", "until", "hold"),
    [
        (False, None, None),
        (True, NOW + timedelta(days=1), None),  # a start_time: it ends by itself
        (True, None, "its Takt job is paused in Takt until resumed"),
    ],
)
def test_a_pause_without_end_holds_the_task(paused, until, hold):
    assert (
        compute_hold(
            registered=True, enabled=True, paused=paused, paused_until=until, off_reason=None
        )
        == hold
    )


def test_the_pause_of_the_job_is_kept():
    prior = Prior(enabled=True, enabled_set=True, paused=True, pause_note="ops")
    translation = translate(BeatTask(1, "t", "x.task", DAILY), now=NOW)
    settle(translation, registered=True, prior=prior)
    assert translation.definition is not None
    assert (translation.definition["paused"], translation.definition["pause_note"]) == (True, "ops")
    assert translation.hold == "its Takt job is paused in Takt until resumed"


def test_overdue_is_said_only_of_a_job_that_will_be_enabled():
    hour_ago = NOW - timedelta(hours=1)
    for enabled, said in ((True, True), (False, False)):
        task = BeatTask(
            1, "t", "x.task", Interval(timedelta(minutes=10)), enabled=enabled, last_run_at=hour_ago
        )
        translation = translate(task, now=NOW)
        settle(translation, registered=True, prior=None)
        assert any("overdue" in n for n in translation.notes) is said


def test_a_known_task_keeps_the_recorded_last_run_and_reads_a_switched_task_as_enabled():
    last = NOW - timedelta(days=1)
    task = BeatTask(1, "t", "x.task", DAILY, enabled=False, total_run_count=3)
    known = known_task(task, switched=True, last_run_at=last, total_run_count=120)
    assert (known.switched, known.last_run_at, known.total_run_count) == (True, last, 120)
    assert translate(known, now=NOW).definition["enabled"] is True  # type: ignore[index]
    enabled_again = known_task(
        BeatTask(1, "t", "x.task", DAILY), switched=True, last_run_at=None, total_run_count=0
    )
    assert not enabled_again.switched
