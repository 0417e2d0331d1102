"""Engine defects the model-based test found (tests/integration/
test_engine_model.py), each as the shrunk sequence of steps, with the
invariants checked after every step as the state machine does. One not
fixed yet is a strict xfail: it turns red when the fix lands, and then
becomes an ordinary regression test (drop the mark, and the model's guard
for it), as each of these did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration import test_engine_model as model

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def state(redis_client: Any, settings: Any, tmp_path: Path) -> Any:
    model.LOCK_FILE["path"] = tmp_path / "NoLock.ini"
    settings.TAKT_MAINTENANCE_LOCK_FILE = str(model.LOCK_FILE["path"])
    machine = model.EngineModel()
    yield machine
    machine.teardown()
    model.LOCK_FILE["path"] = None


def test_a_once_trigger_skipped_as_missed_is_not_repaired_to_fire_again(state: Any) -> None:
    state.set_up(
        start="ordinary day",
        schedules=["once in 50 min"],
        overlap="skip",
        missed="skip",
        pick="latest",
        jitter_s=0,
        max_runs=None,
        concurrency="none",
        condition="none",
        retries=0,
    )
    state.tick_later(seconds=3 * 3600 + 7)  # 2 h 20 min after its time: missed, skipped
    state.check_everything()
    state.tick_later(seconds=1500)  # the stalled-schedule check "repairs" it
    state.check_everything()
    state.tick_later(seconds=1500)
    state.check_everything()


def test_a_retry_does_not_release_the_trigger_waiting_for_its_own_run(state: Any) -> None:
    state.set_up(
        start="ordinary day",
        schedules=["25 min after the start"],
        overlap="allow",
        missed="run_once",
        pick="latest",
        jitter_s=0,
        max_runs=None,
        concurrency="none",
        condition="none",
        retries=2,
    )
    state.tick_on_time(late_s=0)  # run 1, the trigger waits for it
    state.worker_runs_the_next_run(outcome="fail", seconds=0, code=1)  # retried 30 s later
    state.tick_on_time(late_s=0)  # 25 min after its start: run 3; the trigger waits for it
    state.check_everything()
    state.worker_runs_the_next_run(outcome="succeed", seconds=20, code=0)  # the retry starts
    state.check_everything()
    state.tick_on_time(late_s=0)  # fires again: run 3 has not started
    state.check_everything()


def test_switching_maintenance_off_after_the_lock_file_went_ends_it(state: Any) -> None:
    state.set_up(
        start="ordinary day",
        schedules=["cron hourly"],
        overlap="skip",
        missed="run_once",
        pick="latest",
        jitter_s=0,
        max_runs=None,
        concurrency="none",
        condition="none",
        retries=0,
    )
    state.lock_file(action="create", then_tick=True)  # the beat reports it
    state.maintenance(on=True)
    state.lock_file(action="delete", then_tick=True)  # the switch is on: no report
    state.maintenance(on=False)
    state.check_everything()


def test_a_run_put_back_to_wait_for_its_groups_slot_does_not_move_its_trigger(state: Any) -> None:
    """Found by the deep profile (2,000 sequences): a from_start trigger's
    run, claimed by a worker and put back to wait for its group's slot, had
    moved the trigger at its claim as if it had started; the trigger fired
    again 25 minutes later and its run (cancel_other) replaced the one that
    never ran. A run moves it when it is admitted (runs/starting.py)."""
    state.set_up(
        start="before spring DST",
        missed="run_all",
        concurrency="one group",
        overlap="cancel_other",
        jitter_s=0,
        condition="none",
        retries=0,
        pick="latest",
        schedules=["25 min after the start", "cron hourly"],
        max_runs=None,
    )
    state.check_everything()
    state.worker_runs_the_next_run(code=2, outcome="succeed", seconds=0)
    state.check_everything()
    state.two_workers_at_once(code=0, outcome="succeed")
    state.check_everything()
    state.worker_runs_the_next_run(code=0, outcome="succeed", seconds=700)
    state.check_everything()
    state.worker_runs_the_next_run(code=1, outcome="time out", seconds=20)
    state.check_everything()
    state.tick_at_the_next_fire_time(late_s=1)
    state.check_everything()
    state.two_workers_at_once(code=0, outcome="fail")
    state.check_everything()
    state.tick_at_the_next_fire_time(late_s=1)
    state.check_everything()
    state.two_workers_at_once(code=1, outcome="fail")
    state.check_everything()
    state.tick_later(seconds=1)
    state.check_everything()
    state.queue_pause(paused=False)
    state.check_everything()
    state.two_workers_at_once(code=1, outcome="fail")
    state.check_everything()
    state.queue_pause(paused=True)
    state.check_everything()
    state.edit_trigger(schedule="once in 50 min", which=1)
    state.check_everything()
    state.two_workers_at_once(code=0, outcome="fail")
    state.check_everything()
    state.maintenance(on=False)
    state.check_everything()
    state.tick_at_the_next_fire_time(late_s=60)
    state.check_everything()
    state.worker_runs_the_next_run(code=1, outcome="fail", seconds=700)
    state.check_everything()
    state.tick_later(seconds=600)
    state.check_everything()
    state.two_workers_at_once(code=1, outcome="succeed")
    state.check_everything()
    state.two_workers_at_once(code=0, outcome="fail")
    state.check_everything()
    state.two_workers_at_once(code=1, outcome="succeed")
    state.check_everything()
    state.maintenance(on=False)
    state.check_everything()
    state.tick_later(seconds=3600)
    state.check_everything()
    state.queue_pause(paused=False)
    state.check_everything()
    state.tick_later(seconds=3600)
    state.check_everything()
    state.tick_at_the_next_fire_time(late_s=59)
    state.check_everything()
    state.tick_later(seconds=1500)
    state.check_everything()
    state.tick_at_the_next_fire_time(late_s=60)
    state.check_everything()
    state.two_workers_at_once(code=0, outcome="succeed")
    state.check_everything()
    state.tick_later(seconds=3600)
    state.check_everything()
