"""Starting a run (F-23 at start, F-28, F-29, F-31, F-32, F-34): the checks
a run passes between its claim by a worker and its first line of code, as
pure functions of the facts, in this order:

1. cancelled    cancelled meanwhile: it does nothing at all
2. queue        the queue is paused: it waits (held) until the queue resumes
3. maintenance  maintenance mode is on: it is refused (ends `skipped`)
                Both unless its target is on the maintenance allow-list.
4. its job      the job's lock is taken: the overlap policy's second check
                (skip, wait, or take the lock over); a retry always waits,
                and so does a run whose job's slots are held only by runs
                that have ended (their workers are about to free them)
5. slots        exclusive, then the group, then the global limit
                (TAKT_MAX_CONCURRENCY): it waits (held) for a slot and is
                sent again, in priority order, when one frees; never skipped
6. condition    the variable holds an accepted value, else it ends
                `skipped` ("condition not met") and the variable is left as
                it was; with "consume" it is set to -1 now. A retry is not
                checked again: its first try met the condition.

Then it starts (the variable it writes becomes -1). Steps 1-5 are one Redis
round trip (runs/slots.py applies `compute_slots` atomically, with the
same rules written in Lua); step 6 is one compare-and-set in the database
(runs/variables.py). `compute_start` strings them together for the unit
tables and for "Why didn't it run?".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from jobs.core.cron import gettext_noop
from jobs.core.rules import Overlap, OverlapRules
from runs.core.admission import StartAction, compute_start_action


class Wait(StrEnum):
    """What a held run waits for besides its job (Run.waiting_for)."""

    GROUP = "group"  # a slot of its concurrency group
    EXCLUSIVE = "exclusive"  # exclusive: every group to be free, and no other exclusive run
    LIMIT = "limit"  # a slot under the global limit


@dataclass(frozen=True)
class SlotNeeds:
    """The slots a run of the job takes besides its job's lock."""

    group: int | None = None  # the job's concurrency group (its id)
    group_limit: int = 1
    exclusive: bool = False
    global_limit: int | None = None  # TAKT_MAX_CONCURRENCY; None: no limit

    @property
    def any(self) -> bool:
        return self.group is not None or self.exclusive or self.global_limit is not None


@dataclass(frozen=True)
class SlotFacts:
    """The slots held or reserved by OTHER runs at the instant of the start
    (a reservation made for this run counts as its own)."""

    group: int = 0  # in the job's group
    exclusive: int = 0  # exclusive runs running, or waiting for the groups to drain
    grouped: int = 0  # in any group
    running: int = 0  # under the global limit


@dataclass(frozen=True)
class SlotDecision:
    wait: Wait | None  # None: every slot it needs is free: it takes them
    reason: str = ""
    # An exclusive run waiting for the groups to drain reserves the
    # exclusive slot: no new grouped run starts meanwhile, so it cannot starve.
    reserve_exclusive: bool = False


def compute_slots(needs: SlotNeeds, facts: SlotFacts) -> SlotDecision:
    """Step 5. Exclusive and grouped runs exclude each other; jobs in
    different groups run in parallel; the global limit counts every run."""
    if needs.exclusive:
        if facts.exclusive:
            return SlotDecision(Wait.EXCLUSIVE, "another exclusive job runs or waits")
        if facts.grouped:
            return SlotDecision(
                Wait.EXCLUSIVE,
                f"exclusive: {facts.grouped} grouped run(s) must end first",
                reserve_exclusive=True,
            )
    elif needs.group is not None:
        if facts.exclusive:
            return SlotDecision(Wait.GROUP, "an exclusive job runs or waits: every group waits")
        if facts.group >= needs.group_limit:
            return SlotDecision(
                Wait.GROUP, f"its group is full ({facts.group} of {needs.group_limit} running)"
            )
    if needs.global_limit is not None and facts.running >= needs.global_limit:
        return SlotDecision(
            Wait.LIMIT,
            f"the global limit is reached ({facts.running} of TAKT_MAX_CONCURRENCY"
            f"={needs.global_limit} running)",
        )
    return SlotDecision(None)


@dataclass(frozen=True)
class Condition:
    """A job's condition on a result variable (F-32)."""

    variable: str
    accepted: tuple[int, ...]
    consume: bool = False


def condition_met(condition: Condition, value: int | None) -> bool:
    return value is not None and value in condition.accepted


CONDITION_NOT_MET = {
    (True, False): gettext_noop(
        "condition not met: variable %(variable)r is %(value)s, it must be %(accepted)s"
    ),
    (False, False): gettext_noop(
        "condition not met: variable %(variable)r is %(value)s, it must be %(first)s or %(last)s"
    ),
    (True, True): gettext_noop(
        "condition not met: variable %(variable)r is unknown, it must be %(accepted)s"
    ),
    (False, True): gettext_noop(
        "condition not met: variable %(variable)r is unknown, it must be %(first)s or %(last)s"
    ),
}


def condition_message(condition: Condition, value: int | None) -> tuple[str, dict[str, object]]:
    """Why a condition holds a run back, as an English template (marked for
    translation) and its named parameters; see condition_text."""
    accepted = [str(v) for v in condition.accepted]
    params: dict[str, object] = {
        "variable": condition.variable,
        "value": "" if value is None else str(value),
        "accepted": accepted[0],
        "first": ", ".join(accepted[:-1]),
        "last": accepted[-1],
    }
    return CONDITION_NOT_MET[(len(accepted) == 1, value is None)], params


def condition_text(condition: Condition, value: int | None) -> str:
    """Why a condition holds a run back, in English (a run's message, the
    decision log): "condition not met: variable 'Import done' is -1, it
    must be 0 or 200"."""
    template, params = condition_message(condition, value)
    return template % params


class Verdict(StrEnum):
    NOTHING = "nothing"  # cancelled before it started: do nothing at all
    HOLD = "hold"  # back to waiting: the queue, its job or a slot (`wait`)
    SKIP = "skip"  # end it `skipped`: its job is busy (policy skip), or its condition is not met
    REFUSE = "refuse"  # maintenance mode: end it `skipped`, recorded as refused
    START = "start"


@dataclass(frozen=True)
class StartFacts:
    cancelled: bool = False
    paused: bool = False
    maintenance: bool = False
    allowed: bool = False  # its target is on the maintenance allow-list
    job_free: bool = True  # a slot of the job's lock was free
    holders_ended: bool = False  # not free, but every run holding a slot has ended
    overlap: OverlapRules = field(default_factory=OverlapRules)
    retry: bool = False
    needs: SlotNeeds = field(default_factory=SlotNeeds)
    slots: SlotFacts = field(default_factory=SlotFacts)
    condition: Condition | None = None
    value: int | None = None  # the condition variable's value


@dataclass(frozen=True)
class StartDecision:
    verdict: Verdict
    reason: str = ""
    wait: Wait | None = None  # HOLD for a slot: what it waits for
    take_over: bool = False  # overlap policy cancel_other: the job's lock is taken over
    consume: bool = False  # START: set the condition variable back to -1
    reserve_exclusive: bool = False


def compute_start(facts: StartFacts) -> StartDecision:
    """The whole checklist (see the module docstring)."""
    if facts.cancelled:
        return StartDecision(Verdict.NOTHING, "cancelled before it started")
    if facts.paused and not facts.allowed:
        return StartDecision(Verdict.HOLD, "the queue is paused")
    if facts.maintenance and not facts.allowed:
        return StartDecision(Verdict.REFUSE, "maintenance mode")
    take_over = False
    if not facts.job_free:
        action = (
            StartAction.HOLD
            if facts.retry
            else compute_start_action(facts.overlap, holders_ended=facts.holders_ended)
        )
        if action is StartAction.HOLD:
            return StartDecision(Verdict.HOLD, "the job's lock is taken")
        if action is StartAction.SKIP:
            return StartDecision(
                Verdict.SKIP, f"the job's lock is taken (overlap policy '{facts.overlap.policy}')"
            )
        take_over = facts.overlap.policy is Overlap.CANCEL_OTHER
    slots = compute_slots(facts.needs, facts.slots)
    if slots.wait is not None:
        return StartDecision(
            Verdict.HOLD,
            slots.reason,
            wait=slots.wait,
            take_over=take_over,
            reserve_exclusive=slots.reserve_exclusive,
        )
    condition = facts.condition
    if condition is not None and not facts.retry:
        if not condition_met(condition, facts.value):
            return StartDecision(Verdict.SKIP, condition_text(condition, facts.value))
        return StartDecision(Verdict.START, take_over=take_over, consume=condition.consume)
    return StartDecision(Verdict.START, take_over=take_over)
