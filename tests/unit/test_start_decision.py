"""The start of a run (runs/core/start.py) as tables: groups, the
exclusive job, the global limit, conditions and consume, and their order
with the queue switches and the job's own lock. Pure: no database, no
Redis (tests/integration/test_slots.py checks that the Lua script in
runs/slots.py answers as `compute_slots` does, row by row)."""

from __future__ import annotations

import pytest

from jobs.core.rules import Overlap, OverlapRules
from runs.core.start import (
    Condition,
    SlotFacts,
    SlotNeeds,
    StartFacts,
    Verdict,
    Wait,
    compute_slots,
    compute_start,
    condition_met,
    condition_text,
)

GROUP = SlotNeeds(group=7, group_limit=1)
GROUP_OF_2 = SlotNeeds(group=7, group_limit=2)
EXCLUSIVE = SlotNeeds(exclusive=True)
LIMIT_3 = SlotNeeds(global_limit=3)
GROUP_LIMIT_3 = SlotNeeds(group=7, group_limit=2, global_limit=3)

# (needs, facts about the other runs, what it waits for or None, reserves the exclusive slot)
SLOT_TABLE = [
    # nothing to take: it starts whatever runs
    (SlotNeeds(), SlotFacts(group=5, exclusive=1, grouped=9, running=50), None, False),
    # one group, limit 1
    (GROUP, SlotFacts(), None, False),
    (GROUP, SlotFacts(group=1, grouped=1), Wait.GROUP, False),
    # other groups' runs do not count: groups run in parallel
    (GROUP, SlotFacts(group=0, grouped=4), None, False),
    # limit 2
    (GROUP_OF_2, SlotFacts(group=1, grouped=1), None, False),
    (GROUP_OF_2, SlotFacts(group=2, grouped=2), Wait.GROUP, False),
    # an exclusive run (running, or waiting for the groups) blocks every group
    (GROUP, SlotFacts(exclusive=1), Wait.GROUP, False),
    (GROUP_OF_2, SlotFacts(group=0, exclusive=1, grouped=0), Wait.GROUP, False),
    # the exclusive job: starts only while no grouped run runs …
    (EXCLUSIVE, SlotFacts(), None, False),
    (EXCLUSIVE, SlotFacts(grouped=1), Wait.EXCLUSIVE, True),
    (EXCLUSIVE, SlotFacts(grouped=3, group=3), Wait.EXCLUSIVE, True),
    # … and no other exclusive run
    (EXCLUSIVE, SlotFacts(exclusive=1), Wait.EXCLUSIVE, False),
    # ungrouped runs never hold it back
    (EXCLUSIVE, SlotFacts(running=7), None, False),
    # the global limit counts every run
    (LIMIT_3, SlotFacts(running=2), None, False),
    (LIMIT_3, SlotFacts(running=3), Wait.LIMIT, False),
    (GROUP_LIMIT_3, SlotFacts(group=1, grouped=1, running=3), Wait.LIMIT, False),
    # the group is looked at before the global limit
    (GROUP_LIMIT_3, SlotFacts(group=2, grouped=2, running=3), Wait.GROUP, False),
    (SlotNeeds(exclusive=True, global_limit=1), SlotFacts(running=1), Wait.LIMIT, False),
]


@pytest.mark.parametrize(("needs", "facts", "wait", "reserve"), SLOT_TABLE)
def test_the_slots_a_run_takes(needs, facts, wait, reserve) -> None:
    decision = compute_slots(needs, facts)
    assert (decision.wait, decision.reserve_exclusive) == (wait, reserve)
    assert bool(decision.reason) == (wait is not None)


CONDITION = Condition("Import done", (0, 200))
CONSUMED = Condition("Import done", (0, 200), consume=True)


@pytest.mark.parametrize(
    ("value", "met"),
    [(0, True), (200, True), (-1, False), (1, False), (-1002, False), (None, False)],
)
def test_a_condition_holds_for_its_accepted_values(value, met) -> None:
    assert condition_met(CONDITION, value) is met


def test_the_reason_names_the_variable_its_value_and_what_it_must_be() -> None:
    assert condition_text(CONDITION, -1) == (
        "condition not met: variable 'Import done' is -1, it must be 0 or 200"
    )
    assert condition_text(Condition("v", (3,)), None).endswith("is unknown, it must be 3")


BUSY_SKIP = OverlapRules(Overlap.SKIP)
BUSY_BUFFER = OverlapRules(Overlap.BUFFER_ONE)
BUSY_CANCEL = OverlapRules(Overlap.CANCEL_OTHER)

# (facts, verdict, what it waits for, consume, take over)
START_TABLE = [
    (StartFacts(), Verdict.START, None, False, False),
    # 1. cancelled before anything else
    (StartFacts(cancelled=True, paused=True, maintenance=True), Verdict.NOTHING, None, False, False),
    # 2. and 3. the switches, unless the target is on the allow-list
    (StartFacts(paused=True), Verdict.HOLD, None, False, False),
    (StartFacts(paused=True, maintenance=True), Verdict.HOLD, None, False, False),
    (StartFacts(maintenance=True), Verdict.REFUSE, None, False, False),
    (StartFacts(paused=True, maintenance=True, allowed=True), Verdict.START, None, False, False),
    # 4. its own job first: a group is never looked at for a run its job skips
    (
        StartFacts(job_free=False, overlap=BUSY_SKIP, needs=GROUP, slots=SlotFacts(group=1)),
        Verdict.SKIP, None, False, False,
    ),
    (StartFacts(job_free=False, overlap=BUSY_BUFFER), Verdict.HOLD, None, False, False),
    (StartFacts(job_free=False, overlap=BUSY_SKIP, retry=True), Verdict.HOLD, None, False, False),
    # the lock is held only by runs that have ended: it waits for the slot (issue 28)
    (StartFacts(job_free=False, overlap=BUSY_SKIP, holders_ended=True), Verdict.HOLD, None, False, False),
    (StartFacts(job_free=False, overlap=BUSY_CANCEL), Verdict.START, None, False, True),
    # 5. a slot: it waits, never skipped
    (StartFacts(needs=GROUP, slots=SlotFacts(group=1, grouped=1)), Verdict.HOLD, Wait.GROUP, False, False),
    (
        StartFacts(job_free=False, overlap=BUSY_CANCEL, needs=GROUP, slots=SlotFacts(group=1)),
        Verdict.HOLD, Wait.GROUP, False, True,
    ),
    (StartFacts(needs=LIMIT_3, slots=SlotFacts(running=3)), Verdict.HOLD, Wait.LIMIT, False, False),
    # 6. the condition, after the slots: a run that waits leaves the variable alone
    (
        StartFacts(needs=GROUP, slots=SlotFacts(group=1), condition=CONSUMED, value=0),
        Verdict.HOLD, Wait.GROUP, False, False,
    ),
    (StartFacts(condition=CONDITION, value=200), Verdict.START, None, False, False),
    (StartFacts(condition=CONSUMED, value=0), Verdict.START, None, True, False),
    (StartFacts(condition=CONSUMED, value=-1), Verdict.SKIP, None, False, False),
    (StartFacts(condition=CONDITION, value=1), Verdict.SKIP, None, False, False),
    # a retry was let in by its first try's condition
    (StartFacts(condition=CONSUMED, value=-1, retry=True), Verdict.START, None, False, False),
    # maintenance refuses before the condition is read: the variable stays
    (StartFacts(maintenance=True, condition=CONSUMED, value=0), Verdict.REFUSE, None, False, False),
]  # fmt: skip


@pytest.mark.parametrize(("facts", "verdict", "wait", "consume", "take_over"), START_TABLE)
def test_the_start_checklist(facts, verdict, wait, consume, take_over) -> None:
    decision = compute_start(facts)
    assert (decision.verdict, decision.wait, decision.consume, decision.take_over) == (
        verdict,
        wait,
        consume,
        take_over,
    )


def test_a_skip_for_the_condition_says_why() -> None:
    decision = compute_start(StartFacts(condition=CONSUMED, value=-1))
    assert decision.reason == "condition not met: variable 'Import done' is -1, it must be 0 or 200"
