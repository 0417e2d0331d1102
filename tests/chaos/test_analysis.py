"""The chaos test's checks on made-up data (fast, no processes): a check
that cannot fail proves nothing, so each criterion is shown failing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.chaos.analysis import Timeline, analyse, expected_fire_times

T0 = datetime(2026, 3, 29, 0, 59, 58, tzinfo=UTC)  # the night Berlin skips an hour
SECOND = timedelta(seconds=1)
JOB = {"id": 1, "key": "chaos.00", "overlap_policy": "skip", "max_instances": 2, "max_retries": 0}
EVERY_SECOND = {"job_id": 1, "kind": "cron", "cron_expression": "* * * * * *"}


def timeline(seconds: int = 4) -> Timeline:
    return Timeline(
        window_start=T0,
        window_end=T0 + seconds * SECOND,
        # The chaos ended 40 s before: these fire times are those whose
        # start lag must be back under 2 s.
        chaos_start=T0 - 50 * SECOND,
        chaos_end=T0 - 40 * SECOND,
        checked_at=T0 + (seconds + 60) * SECOND,
        dead_after_s=5.5,
    )


def run(run_id: int, at: datetime, status: str = "succeeded", **extra: Any) -> dict[str, Any]:
    row = {
        "id": run_id, "job_id": 1, "trigger": "schedule", "status": status,
        "scheduled_for": at, "enqueued_at": at, "published_at": at,
        "started_at": at + 0.1 * SECOND, "finished_at": at + 0.3 * SECOND,
        "attempt": 1, "retry_of_id": None, "worker": "chaos-w0@host", "message": "",
        "missed_count": 0,
    }  # fmt: skip
    row.update(extra)
    return row


def lines(run_id: int, pid: int = 100, at: datetime = T0, end: bool = True) -> list[dict[str, Any]]:
    start = {"ev": "start", "job": 1, "run": run_id, "pid": pid, "start_wall": at.timestamp()}
    return [start, {**start, "ev": "end"}] if end else [start]


def check(
    runs: list[dict[str, Any]], executions: list[dict[str, Any]], **kw: Any
) -> dict[str, Any]:
    report = analyse(
        jobs=[JOB], triggers=[EVERY_SECOND], runs=runs, stuck=kw.get("stuck", []),
        executions=executions, kills=kw.get("kills", []), timeline=kw.get("timeline", timeline()),
        crashes=[],
    )  # fmt: skip
    return {name: value for name, value, *_ in report.rows} | {"passed": report.passed}


def test_fire_times_of_cron_and_interval_triggers() -> None:
    assert expected_fire_times(EVERY_SECOND, T0, T0 + 2 * SECOND) == [
        T0,
        T0 + SECOND,
        T0 + 2 * SECOND,
    ]
    two = {**EVERY_SECOND, "cron_expression": "*/2 * * * * *"}
    assert expected_fire_times(two, T0 + 0.5 * SECOND, T0 + 4 * SECOND) == [
        T0 + 2 * SECOND,
        T0 + 4 * SECOND,
    ]
    interval = {"kind": "interval", "interval_seconds": 3, "start_at": T0 - 10 * SECOND}
    assert expected_fire_times(interval, T0, T0 + 5 * SECOND) == [T0 + 2 * SECOND, T0 + 5 * SECOND]


def test_every_fire_time_run_once_passes() -> None:
    times = [T0 + i * SECOND for i in range(5)]
    result = check(
        [run(i, t) for i, t in enumerate(times)], [x for i in range(5) for x in lines(i)]
    )
    assert result["fire times in the window"] == 5
    assert result["fire times succeeded"] == 5
    assert result["passed"]


def test_a_missing_row_is_a_hole_and_a_double_end_is_executed_twice() -> None:
    rows = [run(i, T0 + i * SECOND) for i in (0, 1, 3, 4)]
    executions = [x for i in (0, 1, 3) for x in lines(i)] + lines(4) + lines(4, pid=101)
    result = check(rows, executions)
    assert result["holes in the fire times (no row)"] == 1
    assert result["fire times executed twice"] == 1
    assert result["runs started twice (same run id)"] == 1
    assert not result["passed"]


def test_a_skip_behind_a_run_killed_long_before_fails_one_behind_a_live_run_does_not() -> None:
    """Run 0 was killed at T0 + 0.2 s and never ended; the skips 3 s later
    are behind a live run (the lock had not lapsed), those 6 s and more
    later behind a dead one."""
    tl = timeline(seconds=8)
    rows = [run(0, T0, status="running", finished_at=None)]
    rows += [run(i, T0 + i * SECOND, status="skipped", started_at=None) for i in range(1, 9)]
    kills = [{"action": "kill child", "wall": (T0 + 0.2 * SECOND).timestamp(), "pids": [100]}]
    result = check(rows, lines(0, end=False), kills=kills, timeline=tl, stuck=rows[:1])
    assert result["skipped behind an active run not dead (overlap policy)"] == 5  # 1..5 s after
    assert result["skip jobs: skipped behind a run dead > 5.5 s"] == 3  # 6, 7, 8 s after
    assert result["runs queued/running 1 min after the chaos"] == 1
    assert result["without a successful execution (other)"] == 1  # run 0 itself
    assert not result["passed"]


def test_a_skip_behind_a_dead_run_of_an_allow_job_is_shown_not_failed() -> None:
    """The criterion is the issue's: fire times of `skip` jobs. An `allow`
    job at max_instances behind a dead run is counted in its own row."""
    rows = [run(0, T0, status="lost", finished_at=T0 + 9 * SECOND)]
    rows += [run(8, T0 + 8 * SECOND, status="skipped", started_at=None, finished_at=None)]
    kills = [{"action": "kill child", "wall": (T0 + 0.2 * SECOND).timestamp(), "pids": [100]}]
    allow = {**JOB, "overlap_policy": "allow"}
    report = analyse(
        jobs=[allow], triggers=[EVERY_SECOND], runs=rows, stuck=[], executions=lines(0, end=False),
        kills=kills, timeline=timeline(seconds=8), crashes=[],
    )  # fmt: skip
    result = {name: value for name, value, *_ in report.rows}
    assert result["skip jobs: skipped behind a run dead > 5.5 s"] == 0
    assert result["other jobs: skipped behind a run dead > 5.5 s"] == 1


def test_a_killed_run_marked_lost_without_retry_is_lost_by_policy() -> None:
    rows = [run(0, T0, status="lost")] + [run(i, T0 + i * SECOND) for i in range(1, 5)]
    result = check(rows, lines(0, end=False) + [x for i in range(1, 5) for x in lines(i)])
    assert result["lost by policy (killed mid-execution, no retry per the job's policy)"] == 1
    assert result["executions killed mid-way"] == 1
    assert result["passed"]
