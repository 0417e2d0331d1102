"""The checks of "Why didn't it run?" (F-66) that come from how jobs
coordinate: a child's parent and a parent's children (F-04), the condition
on a result variable (F-32), and the slots a run takes besides its job's
lock: its concurrency group, the exclusive slot (F-31) and the global limit
(F-34). Pure, like heartbeats/core/explain.py, which puts them in their
place in the checklist; heartbeats/explaining.py gathers the facts.

The rules are the engine's own: `compute_slots`, `condition_met` and
`condition_text` of runs/core/start.py, asked about a new run of the job
against the slots held now. Each slot check names the runs that hold the
slots (a "reserved" one belongs to a waiting run that is about to start,
or to an exclusive run waiting for the groups to drain) and the job's own
run that waits for one, if any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from heartbeats.core.check import Check, or_words, ordinal
from runs.core.start import (
    Condition,
    SlotFacts,
    SlotNeeds,
    Wait,
    compute_slots,
    condition_met,
    condition_text,
)

# A slot check lists at most this many holders, then "and N more".
HOLDERS_SHOWN = 3
MESSAGE_SHOWN = 300


@dataclass(frozen=True)
class ParentFacts:
    """The parent of the job explained (a child, F-04)."""

    job: str  # in words: "'Nightly' (#3)"
    enabled: bool = True
    paused: bool = False
    has_trigger: bool = True  # an enabled trigger of its own (a schedule or a dependency)
    next_run_at: datetime | None = None  # its soonest fire time
    starts: tuple[str, ...] = ()  # its dependencies: "when job 'Import' (#2) ends succeeded"
    position: int = 0  # this child's place among its enabled children, from 1 (0: disabled)
    siblings: int = 0  # its enabled children
    stop_on_failure: bool = True
    running_run: int | None = None  # its run that is running now
    last_run: int | None = None  # its latest finished run …
    last_status: str = ""
    last_message: str = ""


@dataclass(frozen=True)
class ChildrenFacts:
    """The children of the job explained (a parent, F-04)."""

    enabled: tuple[str, ...]  # in their order, in words
    disabled: int = 0
    stop_on_failure: bool = True


@dataclass(frozen=True)
class ConditionFacts:
    condition: Condition  # its variable's name, the accepted values, consume
    value: int | None  # None: the variable is gone
    changed_at: datetime | None = None
    changed_by: str = ""  # "run #40 of job 'Import' (#3)", "ops (by hand)"
    writers: tuple[str, ...] = ()  # the jobs whose runs write it, in words


@dataclass(frozen=True)
class SlotHolder:
    run_id: int | None
    job: str = ""  # its job in words; "" when the run is unknown (deleted)
    reserved: bool = False
    own: bool = False  # a run of the job explained


@dataclass(frozen=True)
class SlotsFacts:
    """The slots a run of the job takes (`needs`, as runs/waiting.py's
    slot_needs says) and who holds them now."""

    needs: SlotNeeds
    group_name: str = ""
    group: tuple[SlotHolder, ...] = ()  # its group's slots
    grouped: tuple[SlotHolder, ...] = ()  # every group's (read for an exclusive job)
    exclusive: tuple[SlotHolder, ...] = ()  # the exclusive slot
    running: tuple[SlotHolder, ...] = ()  # under TAKT_MAX_CONCURRENCY


# --- parent and children (F-04) -------------------------------------------------


def parent_check(parent: ParentFacts) -> Check:
    """A child has no trigger of its own: what starts it is its parent's run."""
    base = f"child of job {parent.job}: it runs only as part of its parent's run"
    if not parent.enabled:
        return Check("parent", False, f"{base}, and the parent is disabled")
    if parent.paused:
        return Check("parent", False, f"{base}, and the parent is paused")
    if not parent.has_trigger:
        return Check(
            "parent",
            False,
            f"{base}, and the parent has no enabled trigger: it runs only when the parent"
            " is started by hand, the API or enqueue_job",
        )
    detail = base
    if parent.position:
        detail += f", {ordinal(parent.position)} of its {_children(parent.siblings)}"
    detail += f" ({_stop_words(parent.stop_on_failure)})"
    if parent.running_run is not None:
        detail += f"; the parent's run #{parent.running_run} is running now"
    if parent.last_run is not None:
        message = parent.last_message[:MESSAGE_SHOWN]
        detail += f"; the parent's last run #{parent.last_run} ended {parent.last_status}"
        detail += f" ({message})" if message else ""
    if parent.starts:
        detail += f"; the parent starts {or_words(parent.starts)}"
    if parent.next_run_at is not None:
        return Check("parent", True, f"{detail}; the parent runs next at", at=parent.next_run_at)
    return Check("parent", True, detail)


def children_check(children: ChildrenFacts) -> Check:
    """A parent's run runs its children, not its own target."""
    disabled = f"; {children.disabled} disabled child(ren) skipped" if children.disabled else ""
    if not children.enabled:
        return Check(
            "children",
            True,
            f"a parent with no enabled child: its run ends succeeded at once{disabled}",
        )
    return Check(
        "children",
        True,
        f"a parent: its run runs its {_children(len(children.enabled))} in order,"
        f" {', '.join(children.enabled)}, each as a run of its own"
        f" ({_stop_words(children.stop_on_failure)}){disabled}; its own target is not called",
    )


def _children(n: int) -> str:
    return f"{n} enabled {'child' if n == 1 else 'children'}"


def _stop_words(stop_on_failure: bool) -> str:
    if stop_on_failure:
        return "a failed child stops the ones after it"
    return "every child runs, whatever the ones before it did"


# --- the condition (F-32) --------------------------------------------------------


def condition_check(facts: ConditionFacts) -> Check:
    condition = facts.condition
    consume = (
        "; consumed: a run that starts sets it back to -1, so one result starts one run"
        if condition.consume
        else ""
    )
    if condition_met(condition, facts.value):
        return Check(
            "condition",
            True,
            f"variable {condition.variable!r} is {facts.value},"
            f" one of {or_words(condition.accepted)}{consume}",
        )
    if not facts.writers:
        writers = "no job writes it (only an operator sets it)"
    else:
        jobs = "job" if len(facts.writers) == 1 else "jobs"
        writers = f"written by {jobs} {', '.join(facts.writers)}"
    detail = (
        f"{condition_text(condition, facts.value)}; {writers}; until it is met its fire times"
        " pass without a run, a dependency's or parent's run of it ends skipped and Run now is"
        f" refused{consume}"
    )
    if facts.changed_by and facts.changed_at is not None:
        return Check(
            "condition", False, f"{detail}; set by {facts.changed_by} at", at=facts.changed_at
        )
    return Check("condition", False, detail)


# --- slots: the group, the exclusive slot, the global limit (F-31, F-34) ---------


def slot_checks(slots: SlotsFacts, waiting: Sequence[tuple[int, str]] = ()) -> list[Check]:
    """The checks of the slots a run of the job takes; `waiting`: the job's
    own runs held for a slot, (run id, what for: a runs.core.start.Wait)."""
    needs = slots.needs
    checks = []
    if needs.exclusive:
        checks.append(_exclusive_job(slots, _waiters(waiting, Wait.EXCLUSIVE)))
    elif needs.group is not None:
        checks.append(_group(slots, _waiters(waiting, Wait.GROUP)))
        checks.append(_exclusive_for_group(slots))
    if needs.global_limit is not None:
        checks.append(_global_limit(slots, _waiters(waiting, Wait.LIMIT)))
    return checks


def _waiters(waiting: Sequence[tuple[int, str]], wait: Wait) -> list[int]:
    return [run_id for run_id, what in waiting if what == wait.value]


def _group(slots: SlotsFacts, mine: list[int]) -> Check:
    needs, holders = slots.needs, slots.group
    decision = compute_slots(
        SlotNeeds(group=needs.group, group_limit=needs.group_limit), SlotFacts(group=len(holders))
    )
    name = f"{slots.group_name!r} (limit {needs.group_limit})"
    if decision.wait is None:
        taken = f"{len(holders)} of {needs.group_limit} slot(s) taken"
        detail = f"{name}: {taken}" + (f", by {_listing(holders)}" if holders else "")
        if mine:
            detail += f"; run #{mine[0]} of this job waits for one: it is sent by the next tick"
        return Check("group", True, detail)
    detail = (
        f"{name}: {decision.reason}, by {_listing(holders)}; a new run waits (held) for a slot,"
        " and is never skipped for it"
    )
    if mine:
        detail += f"; run #{mine[0]} of this job waits for one"
    return Check("group", False, detail)


def _exclusive_for_group(slots: SlotsFacts) -> Check:
    """A grouped job: an exclusive run (running, or waiting for the groups
    to drain) holds every group back."""
    needs, holders = slots.needs, slots.exclusive
    decision = compute_slots(
        SlotNeeds(group=needs.group, group_limit=needs.group_limit),
        SlotFacts(exclusive=len(holders)),
    )
    if decision.wait is None:
        return Check("exclusive", True, "no exclusive run holds the groups back")
    return Check("exclusive", False, f"{decision.reason} ({_listing(holders)})")


def _exclusive_job(slots: SlotsFacts, mine: list[int]) -> Check:
    """An exclusive job: it starts only while no grouped run and no other
    exclusive run holds a slot, and then holds every group back."""
    others = tuple(h for h in slots.exclusive if not h.own)
    grouped = tuple(h for h in slots.grouped if not h.own)
    decision = compute_slots(
        SlotNeeds(exclusive=True), SlotFacts(exclusive=len(others), grouped=len(grouped))
    )
    waits = f"; run #{mine[0]} of this job waits" if mine else ""
    if decision.wait is None:
        detail = (
            "no grouped run and no other exclusive run: a run starts, and holds every group"
            " back while it runs"
        )
        if mine:
            detail += f"; run #{mine[0]} of this job waits: it is sent by the next tick"
        return Check("exclusive", True, detail)
    if others:
        return Check("exclusive", False, f"{decision.reason} ({_listing(others)}){waits}")
    return Check(
        "exclusive",
        False,
        f"{decision.reason.removeprefix('exclusive: ')}: {_listing(grouped)}; a run of this"
        f" job that waits for them reserves the exclusive slot, so no new grouped run starts"
        f" meanwhile{waits}",
    )


def _global_limit(slots: SlotsFacts, mine: list[int]) -> Check:
    limit = slots.needs.global_limit
    holders = slots.running
    decision = compute_slots(SlotNeeds(global_limit=limit), SlotFacts(running=len(holders)))
    if decision.wait is None:
        detail = f"{len(holders)} of TAKT_MAX_CONCURRENCY={limit} running"
        if mine:
            detail += f"; run #{mine[0]} of this job waits: it is sent by the next tick"
        return Check("global limit", True, detail)
    detail = f"{decision.reason}: {_listing(holders)}; a new run waits (held) for a slot"
    if mine:
        detail += f"; run #{mine[0]} of this job waits for one"
    return Check("global limit", False, detail)


def _listing(holders: Sequence[SlotHolder]) -> str:
    shown = [_holder(h) for h in holders[:HOLDERS_SHOWN]]
    more = len(holders) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _holder(holder: SlotHolder) -> str:
    run = f"run #{holder.run_id}" if holder.run_id is not None else "a run"
    if holder.own:
        run += " of this job"
    elif holder.job:
        run += f" of job {holder.job}"
    return run + (" (reserved)" if holder.reserved else "")
