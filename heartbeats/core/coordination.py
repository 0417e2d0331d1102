"""The checks of "Why didn't it run?" (F-66) that come from how jobs
coordinate: a child's parent and a parent's children (F-04), the condition
on a result variable (F-32), and the slots a run takes besides its job's
lock: its concurrency group, the exclusive slot (F-31) and the global limit
(F-34). Pure, like heartbeats/core/explain.py, which puts them in their
place in the checklist; heartbeats/explaining.py gathers the facts.

The rules are the engine's own: `compute_slots`, `condition_met` and
`condition_message` of runs/core/start.py, asked about a new run of the job
against the slots held now. Each slot check names the runs that hold the
slots (a "reserved" one belongs to a waiting run that is about to start,
or to an exclusive run waiting for the groups to drain) and the job's own
run that waits for one, if any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from heartbeats.core.check import (
    Check,
    Joined,
    Phrase,
    or_phrase,
    ordinal_phrase,
    phrase,
    said,
    said_phrase,
)
from jobs.core.cron import gettext_noop
from runs.core.start import (
    Condition,
    SlotFacts,
    SlotNeeds,
    Wait,
    compute_slots,
    condition_message,
    condition_met,
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
    starts: tuple[object, ...] = ()  # its dependencies: "when job 'Import' (#2) ends succeeded"
    position: int = 0  # this child's place among its enabled children, from 1 (0: disabled)
    siblings: int = 0  # its enabled children
    stop_on_failure: bool = True
    running_run: int | None = None  # its run that is running now
    last_run: int | None = None  # its latest finished run …
    last_status: object = ""  # "timed out" (a Phrase, or text)
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
    changed_by: object = ""  # "run #40 of job 'Import' (#3)", "ops (by hand)"
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
    job = parent.job
    if not parent.enabled:
        detail = gettext_noop(
            "child of job %(job)s: it runs only as part of its parent's run,"
            " and the parent is disabled"
        )
        return said("parent", False, detail, job=job)
    if parent.paused:
        detail = gettext_noop(
            "child of job %(job)s: it runs only as part of its parent's run,"
            " and the parent is paused"
        )
        return said("parent", False, detail, job=job)
    if not parent.has_trigger:
        detail = gettext_noop(
            "child of job %(job)s: it runs only as part of its parent's run, and the parent"
            " has no enabled trigger: it runs only when the parent is started by hand, the API"
            " or enqueue_job"
        )
        return said("parent", False, detail, job=job)
    words = phrase(
        gettext_noop("child of job %(job)s: it runs only as part of its parent's run"), job=job
    )
    if parent.position:
        words = phrase(
            gettext_noop("%(before)s, %(position)s of its %(children)s"),
            before=words,
            position=ordinal_phrase(parent.position),
            children=_children(parent.siblings),
        )
    words = phrase(
        gettext_noop("%(before)s (%(stop)s)"),
        before=words,
        stop=_stop_words(parent.stop_on_failure),
    )
    if parent.running_run is not None:
        words = phrase(
            gettext_noop("%(before)s; the parent's run #%(run)s is running now"),
            before=words,
            run=parent.running_run,
        )
    if parent.last_run is not None:
        message = parent.last_message[:MESSAGE_SHOWN]
        values = {"before": words, "run": parent.last_run, "status": parent.last_status}
        words = (
            phrase(
                gettext_noop("%(before)s; the parent's last run #%(run)s ended %(status)s"),
                **values,
            )
            if not message
            else phrase(
                gettext_noop(
                    "%(before)s; the parent's last run #%(run)s ended %(status)s (%(text)s)"
                ),
                text=message,
                **values,
            )
        )
    if parent.starts:
        words = phrase(
            gettext_noop("%(before)s; the parent starts %(starts)s"),
            before=words,
            starts=or_phrase(parent.starts),
        )
    if parent.next_run_at is not None:
        words = phrase(gettext_noop("%(before)s; the parent runs next at"), before=words)
        return said_phrase("parent", True, words, at=parent.next_run_at)
    return said_phrase("parent", True, words)


def children_check(children: ChildrenFacts) -> Check:
    """A parent's run runs its children, not its own target."""
    disabled: Phrase | str = ""
    if children.disabled:
        disabled = phrase(
            gettext_noop("; %(count)s disabled child(ren) skipped"), count=children.disabled
        )
    if not children.enabled:
        return said(
            "children",
            True,
            gettext_noop(
                "a parent with no enabled child: its run ends succeeded at once%(disabled)s"
            ),
            disabled=disabled,
        )
    return said(
        "children",
        True,
        gettext_noop(
            "a parent: its run runs its %(children)s in order, %(names)s, each as a run of its"
            " own (%(stop)s)%(disabled)s; its own target is not called"
        ),
        children=_children(len(children.enabled)),
        names=", ".join(children.enabled),
        stop=_stop_words(children.stop_on_failure),
        disabled=disabled,
    )


def _children(n: int) -> Phrase:
    if n == 1:
        return phrase(gettext_noop("%(count)s enabled child"), count=n)
    return phrase(gettext_noop("%(count)s enabled children"), count=n)


def _stop_words(stop_on_failure: bool) -> Phrase:
    if stop_on_failure:
        return phrase(gettext_noop("a failed child stops the ones after it"))
    return phrase(gettext_noop("every child runs, whatever the ones before it did"))


# --- the condition (F-32) --------------------------------------------------------


def condition_check(facts: ConditionFacts) -> Check:
    condition = facts.condition
    consume: Phrase | str = ""
    if condition.consume:
        consume = phrase(
            gettext_noop(
                "; consumed: a run that starts sets it back to -1, so one result starts one run"
            )
        )
    if condition_met(condition, facts.value):
        return said(
            "condition",
            True,
            gettext_noop("variable %(variable)s is %(value)s, one of %(accepted)s%(consume)s"),
            variable=repr(condition.variable),
            value=facts.value,
            accepted=or_phrase(condition.accepted),
            consume=consume,
        )
    if not facts.writers:
        writers = phrase(gettext_noop("no job writes it (only an operator sets it)"))
    elif len(facts.writers) == 1:
        writers = phrase(gettext_noop("written by job %(jobs)s"), jobs=facts.writers[0])
    else:
        writers = phrase(gettext_noop("written by jobs %(jobs)s"), jobs=", ".join(facts.writers))
    words = phrase(
        gettext_noop(
            "%(reason)s; %(writers)s; until it is met its fire times pass without a run, a"
            " dependency's or parent's run of it ends skipped and Run now is refused%(consume)s"
        ),
        reason=Phrase(*condition_message(condition, facts.value)),
        writers=writers,
        consume=consume,
    )
    if facts.changed_by and facts.changed_at is not None:
        words = phrase(
            gettext_noop("%(before)s; set by %(who)s at"), before=words, who=facts.changed_by
        )
        return said_phrase("condition", False, words, at=facts.changed_at)
    return said_phrase("condition", False, words)


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
    facts = SlotFacts(group=len(holders))
    decision = compute_slots(SlotNeeds(group=needs.group, group_limit=needs.group_limit), facts)
    name = phrase(
        gettext_noop("%(group)s (limit %(limit)s)"),
        group=repr(slots.group_name),
        limit=needs.group_limit,
    )
    if decision.wait is None:
        words = phrase(
            gettext_noop("%(name)s: %(count)s of %(limit)s slot(s) taken"),
            name=name,
            count=len(holders),
            limit=needs.group_limit,
        )
        if holders:
            words = phrase(
                gettext_noop("%(before)s, by %(holders)s"), before=words, holders=_listing(holders)
            )
        if mine:
            words = phrase(_SENT_NEXT_TICK, before=words, run=mine[0])
        return said_phrase("group", True, words)
    words = phrase(
        gettext_noop(
            "%(name)s: %(reason)s, by %(holders)s; a new run waits (held) for a slot,"
            " and is never skipped for it"
        ),
        name=name,
        reason=_reason(decision.reason, facts, needs),
        holders=_listing(holders),
    )
    if mine:
        words = phrase(_WAITS_FOR_ONE, before=words, run=mine[0])
    return said_phrase("group", False, words)


# The clauses that name a run of this job waiting for a slot.
_SENT_NEXT_TICK = gettext_noop(
    "%(before)s; run #%(run)s of this job waits for one: it is sent by the next tick"
)
_WAITS_FOR_ONE = gettext_noop("%(before)s; run #%(run)s of this job waits for one")
_WAITS_SENT_NEXT_TICK = gettext_noop(
    "%(before)s; run #%(run)s of this job waits: it is sent by the next tick"
)


def _exclusive_for_group(slots: SlotsFacts) -> Check:
    """A grouped job: an exclusive run (running, or waiting for the groups
    to drain) holds every group back."""
    needs, holders = slots.needs, slots.exclusive
    facts = SlotFacts(exclusive=len(holders))
    decision = compute_slots(SlotNeeds(group=needs.group, group_limit=needs.group_limit), facts)
    if decision.wait is None:
        return said("exclusive", True, gettext_noop("no exclusive run holds the groups back"))
    return said(
        "exclusive",
        False,
        gettext_noop("%(reason)s (%(holders)s)"),
        reason=_reason(decision.reason, facts, needs),
        holders=_listing(holders),
    )


def _exclusive_job(slots: SlotsFacts, mine: list[int]) -> Check:
    """An exclusive job: it starts only while no grouped run and no other
    exclusive run holds a slot, and then holds every group back."""
    others = tuple(h for h in slots.exclusive if not h.own)
    grouped = tuple(h for h in slots.grouped if not h.own)
    needs = SlotNeeds(exclusive=True)
    facts = SlotFacts(exclusive=len(others), grouped=len(grouped))
    decision = compute_slots(needs, facts)
    if decision.wait is None:
        words = phrase(
            gettext_noop(
                "no grouped run and no other exclusive run: a run starts, and holds every group"
                " back while it runs"
            )
        )
        if mine:
            words = phrase(_WAITS_SENT_NEXT_TICK, before=words, run=mine[0])
        return said_phrase("exclusive", True, words)
    if others:
        words = phrase(
            gettext_noop("%(reason)s (%(holders)s)"),
            reason=_reason(decision.reason, facts, needs),
            holders=_listing(others),
        )
    else:
        words = phrase(
            gettext_noop(
                "%(count)s grouped run(s) must end first: %(holders)s; a run of this job that"
                " waits for them reserves the exclusive slot, so no new grouped run starts"
                " meanwhile"
            ),
            count=len(grouped),
            holders=_listing(grouped),
        )
    if mine:
        words = phrase(
            gettext_noop("%(before)s; run #%(run)s of this job waits"), before=words, run=mine[0]
        )
    return said_phrase("exclusive", False, words)


def _global_limit(slots: SlotsFacts, mine: list[int]) -> Check:
    limit = slots.needs.global_limit
    holders = slots.running
    needs, facts = SlotNeeds(global_limit=limit), SlotFacts(running=len(holders))
    decision = compute_slots(needs, facts)
    if decision.wait is None:
        words = phrase(
            gettext_noop("%(count)s of TAKT_MAX_CONCURRENCY=%(limit)s running"),
            count=len(holders),
            limit=limit,
        )
        if mine:
            words = phrase(_WAITS_SENT_NEXT_TICK, before=words, run=mine[0])
        return said_phrase("global limit", True, words)
    words = phrase(
        gettext_noop("%(reason)s: %(holders)s; a new run waits (held) for a slot"),
        reason=_reason(decision.reason, facts, needs),
        holders=_listing(holders),
    )
    if mine:
        words = phrase(_WAITS_FOR_ONE, before=words, run=mine[0])
    return said_phrase("global limit", False, words)


def _reason(reason: str, facts: SlotFacts, needs: SlotNeeds) -> Phrase | str:
    """The engine's reason (runs.core.start.compute_slots, English) as a
    marked phrase; the engine's own words when they differ from every one."""
    candidates = (
        phrase(gettext_noop("another exclusive job runs or waits")),
        phrase(gettext_noop("an exclusive job runs or waits: every group waits")),
        phrase(
            gettext_noop("its group is full (%(count)s of %(limit)s running)"),
            count=facts.group,
            limit=needs.group_limit,
        ),
        phrase(
            gettext_noop(
                "the global limit is reached (%(count)s of TAKT_MAX_CONCURRENCY=%(limit)s running)"
            ),
            count=facts.running,
            limit=needs.global_limit,
        ),
    )
    return next((words for words in candidates if str(words) == reason), reason)


def _listing(holders: Sequence[SlotHolder]) -> Joined | Phrase:
    shown = Joined(tuple(_holder(h) for h in holders[:HOLDERS_SHOWN]))
    more = len(holders) - len(shown.items)
    if more > 0:
        return phrase(gettext_noop("%(holders)s and %(count)s more"), holders=shown, count=more)
    return shown


def _holder(holder: SlotHolder) -> Phrase:
    values: dict[str, object] = {"run": holder.run_id, "job": holder.job}
    if holder.run_id is not None:
        if holder.own:
            words = phrase(gettext_noop("run #%(run)s of this job"), **values)
        elif holder.job:
            words = phrase(gettext_noop("run #%(run)s of job %(job)s"), **values)
        else:
            words = phrase(gettext_noop("run #%(run)s"), **values)
    elif holder.own:
        words = phrase(gettext_noop("a run of this job"))
    elif holder.job:
        words = phrase(gettext_noop("a run of job %(job)s"), job=holder.job)
    else:
        words = phrase(gettext_noop("a run"))
    if holder.reserved:
        return phrase(gettext_noop("%(before)s (reserved)"), before=words)
    return words
