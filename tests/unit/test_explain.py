"""F-66: the "why didn't it run?" checklist, one table per check."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from heartbeats.core.coordination import (
    ChildrenFacts,
    ConditionFacts,
    ParentFacts,
    SlotHolder,
    SlotsFacts,
)
from heartbeats.core.explain import BeatFacts, JobFacts, RunFacts, TriggerFacts, explain
from runs.core.start import Condition, SlotNeeds

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
        (
            {
                "maintenance": True,
                "target": "reports.nightly",
                "allow_list": ("takt.maintenance_off",),
            },
            "maintenance",
            "maintenance mode is on: target 'reports.nightly' is not on the maintenance allow-list"
            " (takt.maintenance_off), so every start is refused and recorded skipped",
        ),
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
    assert (
        "is on the maintenance allow-list: its runs start"
        in next(c for c in answer.checks if c.name == "maintenance").detail
    )


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


# --- the queue switches and the maintenance allow-list (F-28, F-29) ---------------

ALLOW_LIST = ("takt.maintenance_off", "takt.pause_queue", "takt.resume_queue")


@pytest.mark.parametrize(
    ("changes", "ok", "words"),
    [
        ({}, True, "off"),
        (
            {
                "maintenance": True,
                "target": "takt.maintenance_off",
                "allowed_during_maintenance": True,
            },
            True,
            "maintenance mode is on; target 'takt.maintenance_off' is on the maintenance"
            " allow-list: its runs start",
        ),
        (
            {"maintenance": True, "target": "erp.import", "allow_list": ALLOW_LIST},
            False,
            "maintenance mode is on: target 'erp.import' is not on the maintenance allow-list"
            " (takt.maintenance_off, takt.pause_queue, takt.resume_queue), so every start is"
            " refused and recorded skipped (manage.py maintenance_mode off ends it)",
        ),
        (
            {
                "maintenance": True,
                "maintenance_note": "database upgrade",
                "maintenance_lock_file": "/srv/erp/NoLock.ini",
                "target": "erp.import",
            },
            False,
            "maintenance mode is on (database upgrade; the lock file /srv/erp/NoLock.ini exists):"
            " target 'erp.import' is not on the maintenance allow-list (empty)",
        ),
    ],
)
def test_maintenance_names_the_target_and_the_allow_list(changes, ok, words):
    check = next(
        c for c in explain(replace(READY, **changes), now=NOW).checks if c.name == "maintenance"
    )
    assert check.ok is ok
    assert check.detail.startswith(words), check.detail


@pytest.mark.parametrize(
    ("changes", "ok", "words"),
    [
        ({}, True, "running"),
        ({"queue_paused": True, "target": "erp.import"}, False, "the queue is paused"),
        (
            {
                "queue_paused": True,
                "queue_pause_note": "deploy",
                "queue_paused_until": LATER,
                "target": "takt.resume_queue",
                "allowed_during_maintenance": True,
            },
            True,
            "the queue is paused: deploy, but target 'takt.resume_queue' is on the maintenance"
            " allow-list: its runs start while the queue is paused; it resumes by itself at 08:10:00",
        ),
    ],
)
def test_a_paused_queue_holds_back_every_job_but_the_allowed_ones(changes, ok, words):
    check = next(c for c in explain(replace(READY, **changes), now=NOW).checks if c.name == "queue")
    assert (check.ok, check.text(utc)) == (ok, words)


# --- parent and children (F-04) -----------------------------------------------------

PARENT = ParentFacts(
    "'Nightly' (#3)", next_run_at=LATER, position=2, siblings=3, stop_on_failure=True
)
CHILD = replace(READY, triggers=(), parent=PARENT)


@pytest.mark.parametrize(
    ("parent", "ok", "words"),
    [
        (
            PARENT,
            True,
            "child of job 'Nightly' (#3): it runs only as part of its parent's run, 2nd of its 3"
            " enabled children (a failed child stops the ones after it); the parent runs next at"
            " 08:10:00",
        ),
        (
            replace(PARENT, enabled=False),
            False,
            "child of job 'Nightly' (#3): it runs only as part of its parent's run, and the"
            " parent is disabled",
        ),
        (replace(PARENT, paused=True), False, "and the parent is paused"),
        (
            replace(PARENT, has_trigger=False, next_run_at=None),
            False,
            "and the parent has no enabled trigger: it runs only when the parent is started by"
            " hand, the API or enqueue_job",
        ),
        (
            replace(
                PARENT,
                next_run_at=None,
                starts=("when job 'Import' (#2) ends succeeded",),
                stop_on_failure=False,
                running_run=41,
                last_run=40,
                last_status="failed",
                last_message="children: 'A' failed, 'B' not run (stopped after 'A' failed)",
            ),
            True,
            "2nd of its 3 enabled children (every child runs, whatever the ones before it did);"
            " the parent's run #41 is running now; the parent's last run #40 ended failed"
            " (children: 'A' failed, 'B' not run (stopped after 'A' failed)); the parent starts"
            " when job 'Import' (#2) ends succeeded",
        ),
    ],
)
def test_a_child_is_started_by_its_parent(parent, ok, words):
    answer = explain(replace(CHILD, parent=parent), now=NOW)
    check = next(c for c in answer.checks if c.name == "parent")
    assert check.ok is ok
    assert words in check.text(utc)
    # a child has no trigger of its own: no trigger, window or fire time check
    assert {c.name for c in answer.checks}.isdisjoint(
        {"trigger", "weekday and time window", "next fire time"}
    )


def test_a_child_runs_with_its_parent():
    assert explain(CHILD, now=NOW).verdict(utc) == (
        "nothing holds it back: it runs as part of its parent 'Nightly' (#3)'s run,"
        " next at 08:10:00"
    )
    answer = explain(replace(CHILD, parent=replace(PARENT, next_run_at=None)), now=NOW)
    assert answer.verdict(utc) == (
        "nothing holds it back: it runs as part of its parent 'Nightly' (#3)'s run"
    )
    disabled = explain(replace(CHILD, enabled=False), now=NOW).holding_back
    assert disabled.detail == "the job is disabled: its parent's runs skip it"


def test_a_parents_run_holds_no_lock_while_its_children_run():
    """Its worker is not gone: the parent's run waits for its child's."""
    parent_run = RunFacts(
        12,
        "running",
        NOW - timedelta(hours=1),
        worker="celery@w1",
        lock_alive=False,
        child="run #42 of job 'Import' (#4), queued",
    )
    facts = replace(READY, children=ChildrenFacts(("'Import' (#4)",)), active_runs=(parent_run,))
    answer = explain(facts, now=NOW)
    assert answer.holding_back.text(utc) == (
        "run #12 runs its children (now run #42 of job 'Import' (#4), queued); the next fire"
        " time is recorded as skipped; running since 07:00:00"
    )
    assert answer.blocking_run_id == 12


def test_the_checks_come_in_the_order_the_scheduler_applies_them():
    names = [c.name for c in explain(CHILD, now=NOW).checks]
    assert names == [
        "enabled", "beat", "scheduler switch", "queue", "maintenance", "job pause", "parent",
        "active runs", "worker", "lock",
    ]  # fmt: skip
    full = replace(
        READY,
        condition=ConditionFacts(Condition("v", (0,)), 0),
        slots=SlotsFacts(SlotNeeds(group=1, global_limit=5), group_name="g"),
    )
    names = [c.name for c in explain(full, now=NOW).checks]
    assert names == [
        "enabled", "beat", "scheduler switch", "queue", "maintenance", "job pause", "trigger",
        "weekday and time window", "next fire time", "condition", "active runs", "group",
        "exclusive", "global limit", "worker", "lock",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("children", "words"),
    [
        (
            ChildrenFacts(("'Import' (#4)", "'Transform' (#5)"), disabled=1),
            "a parent: its run runs its 2 enabled children in order, 'Import' (#4), 'Transform'"
            " (#5), each as a run of its own (a failed child stops the ones after it); 1 disabled"
            " child(ren) skipped; its own target is not called",
        ),
        (
            ChildrenFacts(("'Import' (#4)",), stop_on_failure=False),
            "a parent: its run runs its 1 enabled child in order, 'Import' (#4), each as a run of"
            " its own (every child runs, whatever the ones before it did); its own target is not"
            " called",
        ),
        (
            ChildrenFacts((), disabled=2, stop_on_failure=False),
            "a parent with no enabled child: its run ends succeeded at once; 2 disabled"
            " child(ren) skipped",
        ),
    ],
)
def test_a_parent_says_which_children_its_run_runs(children, words):
    answer = explain(replace(READY, children=children), now=NOW)
    check = next(c for c in answer.checks if c.name == "children")
    assert check.ok and check.detail == words
    assert answer.holding_back is None


# --- dependencies (F-33) -------------------------------------------------------------

AFTER_IMPORT = TriggerFacts(
    "after job 'Import' (#3) ends succeeded",
    enabled=True,
    next_run_at=None,
    allowed_now=True,
    upstream="'Import' (#3)",
    statuses=("succeeded",),
)


@pytest.mark.parametrize(
    ("triggers", "words", "verdict"),
    [
        (
            (AFTER_IMPORT,),
            "1 enabled: starts when job 'Import' (#3) ends succeeded",
            "nothing holds it back: it runs when job 'Import' (#3) ends succeeded",
        ),
        (
            (
                replace(
                    AFTER_IMPORT,
                    statuses=("failed", "timed_out", "lost"),
                    upstream_last="its last run #40 ended succeeded",
                ),
            ),
            "1 enabled: starts when job 'Import' (#3) ends failed, timed out or lost (its last"
            " run #40 ended succeeded)",
            "nothing holds it back: it runs when job 'Import' (#3) ends failed, timed out or lost",
        ),
        (
            (SOON, AFTER_IMPORT),
            "2 enabled: every hour; starts when job 'Import' (#3) ends succeeded",
            "nothing holds it back: it runs next at 08:10:00",
        ),
        (
            (replace(AFTER_IMPORT, enabled=False),),
            "no enabled trigger",
            "held back by: trigger (no enabled trigger (it runs only when started by hand, the"
            " API or enqueue_job))",
        ),
    ],
)
def test_a_dependency_starts_the_job_when_another_one_ends(triggers, words, verdict):
    answer = explain(replace(READY, triggers=triggers), now=NOW)
    check = next(c for c in answer.checks if c.name == "trigger")
    assert check.detail.startswith(words), check.detail
    assert answer.verdict(utc) == verdict
    clock = any(t.enabled and not t.upstream for t in triggers)
    names = {c.name for c in answer.checks}
    assert ("next fire time" in names) is clock  # a dependency has no fire time of its own


# --- the condition (F-32) ------------------------------------------------------------

IMPORT_DONE = Condition("Import done", (0, 200))


@pytest.mark.parametrize(
    ("facts", "ok", "words"),
    [
        (ConditionFacts(IMPORT_DONE, 200), True, "variable 'Import done' is 200, one of 0 or 200"),
        (
            ConditionFacts(replace(IMPORT_DONE, consume=True), 0),
            True,
            "variable 'Import done' is 0, one of 0 or 200; consumed: a run that starts sets it"
            " back to -1, so one result starts one run",
        ),
        (
            ConditionFacts(
                IMPORT_DONE,
                -1,
                changed_at=NOW - timedelta(hours=1),
                changed_by="run #40 of job 'Import' (#3)",
                writers=("'Import' (#3)",),
            ),
            False,
            "condition not met: variable 'Import done' is -1, it must be 0 or 200; written by job"
            " 'Import' (#3); until it is met its fire times pass without a run, a dependency's or"
            " parent's run of it ends skipped and Run now is refused; set by run #40 of job"
            " 'Import' (#3) at 07:00:00",
        ),
        (
            ConditionFacts(replace(IMPORT_DONE, consume=True), -1002),
            False,
            "condition not met: variable 'Import done' is -1002, it must be 0 or 200; no job"
            " writes it (only an operator sets it); until it is met its fire times pass without a"
            " run, a dependency's or parent's run of it ends skipped and Run now is refused;"
            " consumed: a run that starts sets it back to -1",
        ),
        (ConditionFacts(IMPORT_DONE, None), False, "variable 'Import done' is unknown"),
    ],
)
def test_the_condition_names_the_variable_its_value_and_the_accepted_ones(facts, ok, words):
    answer = explain(replace(READY, condition=facts), now=NOW)
    check = next(c for c in answer.checks if c.name == "condition")
    assert check.ok is ok
    assert words in check.text(utc)
    if not ok:
        assert answer.holding_back is check


# --- the slots: group, exclusive, global limit (F-31, F-34) ---------------------------

IMPORTS = SlotNeeds(group=7, group_limit=1)
A5 = SlotHolder(5, "'Import A' (#3)")
B6 = SlotHolder(6, "'Import B' (#4)", reserved=True)
BACKUP = SlotHolder(9, "'Backup' (#8)")


def slots(needs: SlotNeeds = IMPORTS, **holders) -> SlotsFacts:
    return SlotsFacts(needs, group_name="Imports", **holders)


def waiting_run(run_id: int, what: str) -> RunFacts:
    return RunFacts(run_id, "queued", NOW, held=True, waiting_for=what)


@pytest.mark.parametrize(
    ("facts", "runs", "check", "ok", "words"),
    [
        (slots(), (), "group", True, "'Imports' (limit 1): 0 of 1 slot(s) taken"),
        (
            slots(replace(IMPORTS, group_limit=2), group=(A5,)),
            (),
            "group",
            True,
            "'Imports' (limit 2): 1 of 2 slot(s) taken, by run #5 of job 'Import A' (#3)",
        ),
        (
            slots(group=(A5,)),
            (),
            "group",
            False,
            "'Imports' (limit 1): its group is full (1 of 1 running), by run #5 of job 'Import A'"
            " (#3); a new run waits (held) for a slot, and is never skipped for it",
        ),
        (
            slots(replace(IMPORTS, group_limit=2), group=(A5, B6)),
            (waiting_run(7, "group"),),
            "group",
            False,
            "its group is full (2 of 2 running), by run #5 of job 'Import A' (#3), run #6 of job"
            " 'Import B' (#4) (reserved); a new run waits (held) for a slot, and is never skipped"
            " for it; run #7 of this job waits for one",
        ),
        (
            slots(group=(), exclusive=()),
            (waiting_run(7, "group"),),
            "group",
            True,
            "0 of 1 slot(s) taken; run #7 of this job waits for one: it is sent by the next tick",
        ),
        (slots(), (), "exclusive", True, "no exclusive run holds the groups back"),
        (
            slots(exclusive=(replace(BACKUP, reserved=True),)),
            (),
            "exclusive",
            False,
            "an exclusive job runs or waits: every group waits (run #9 of job 'Backup' (#8)"
            " (reserved))",
        ),
        (
            slots(SlotNeeds(exclusive=True)),
            (),
            "exclusive",
            True,
            "no grouped run and no other exclusive run: a run starts, and holds every group back"
            " while it runs",
        ),
        (
            slots(
                SlotNeeds(exclusive=True), grouped=(A5, B6), exclusive=(SlotHolder(7, own=True),)
            ),
            (waiting_run(7, "exclusive"),),
            "exclusive",
            False,
            "2 grouped run(s) must end first: run #5 of job 'Import A' (#3), run #6 of job 'Import"
            " B' (#4) (reserved); a run of this job that waits for them reserves the exclusive"
            " slot, so no new grouped run starts meanwhile; run #7 of this job waits",
        ),
        (
            slots(SlotNeeds(exclusive=True), exclusive=(BACKUP,)),
            (),
            "exclusive",
            False,
            "another exclusive job runs or waits (run #9 of job 'Backup' (#8))",
        ),
        (
            slots(SlotNeeds(global_limit=3), running=(A5, B6)),
            (),
            "global limit",
            True,
            "2 of TAKT_MAX_CONCURRENCY=3 running",
        ),
        (
            slots(
                SlotNeeds(global_limit=3),
                running=(A5, B6, BACKUP, SlotHolder(10, "'Report' (#9)")),
            ),
            (waiting_run(7, "limit"),),
            "global limit",
            False,
            "the global limit is reached (4 of TAKT_MAX_CONCURRENCY=3 running): run #5 of job"
            " 'Import A' (#3), run #6 of job 'Import B' (#4) (reserved), run #9 of job 'Backup'"
            " (#8) and 1 more; a new run waits (held) for a slot; run #7 of this job waits for one",
        ),
    ],
)
def test_the_slots_name_their_holders_and_the_run_that_waits(facts, runs, check, ok, words):
    answer = explain(replace(READY, slots=facts, active_runs=runs), now=NOW)
    found = next(c for c in answer.checks if c.name == check)
    assert found.ok is ok
    assert words in found.detail, found.detail
    assert found.run_id is None  # another job's run is never offered for cancelling here


@pytest.mark.parametrize(
    ("needs", "names"),
    [
        (SlotNeeds(), []),  # a parent, or a job in no group without a global limit
        (IMPORTS, ["group", "exclusive"]),
        (SlotNeeds(exclusive=True), ["exclusive"]),
        (SlotNeeds(global_limit=4), ["global limit"]),
        (SlotNeeds(exclusive=True, global_limit=4), ["exclusive", "global limit"]),
    ],
)
def test_only_the_slots_a_run_takes_are_checked(needs, names):
    answer = explain(replace(READY, slots=slots(needs)), now=NOW)
    shown = [c.name for c in answer.checks if c.name in {"group", "exclusive", "global limit"}]
    assert shown == names


def test_a_run_of_the_job_waiting_for_a_slot_is_named_first():
    """Its own held run holds new runs back (the overlap policy); the slot
    check after it says what that run waits for."""
    facts = replace(READY, slots=slots(group=(A5,)), active_runs=(waiting_run(7, "group"),))
    answer = explain(facts, now=NOW)
    assert answer.verdict(utc) == (
        "held back by: active runs (run #7 is queued (held, waiting for a slot of its"
        " concurrency group); the next fire time is recorded as skipped; due since 08:00:00)"
    )
    assert answer.blocking_run_id == 7
    assert [c.name for c in answer.checks if not c.ok] == ["active runs", "group"]
