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
