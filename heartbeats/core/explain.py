""" "Why didn't it run?" (F-66): the checklist an operator walks, as a pure
function of the facts about one job at `now`. Part of the pure core: no
Django, no clock reads. heartbeats/explaining.py gathers the facts;
`manage.py explain_job <id>` and the job editor in the admin print the
answer.

The checks, in the order the scheduler applies them:

 1. enabled           the job is enabled (a run limit that was reached disables it)
 2. beat              a beat is alive (its heartbeat is within its deadline)
 3. scheduler switch  at least one live beat dispatches by schedule (TAKT_SCHEDULER_ENABLED)
 4. queue             the queue is not paused, or the job's target is on the
                      maintenance allow-list (its runs start while paused)
 5. maintenance       maintenance mode is off, or the job's target is on the allow-list
 6. job pause         the job is not paused
 7. parent            a child (F-04): it has no trigger of its own, its parent's
                      run starts it; the parent is enabled, not paused, and has a trigger
    children          a parent: the children its run runs, in order (never fails)
 8. trigger           the job has an enabled trigger (a dependency: "starts when
                      job X ends succeeded")
 9. weekday and time window   now is allowed by some clock trigger
10. next fire time    it has one, and it is not overdue
11. condition         its result variable holds an accepted value (F-32)
12. active runs       no active run holds a new run back (overlap policy)
13. group             its concurrency group has a free slot (F-31)
14. exclusive         a grouped job: no exclusive run holds every group back;
                      an exclusive job: no grouped run and no other exclusive run
15. global limit      fewer runs than TAKT_MAX_CONCURRENCY (F-34)
16. worker            a worker is alive to execute runs
17. lock              the job's lock is not held by a run that is not running

8-10 are left out for a child; 9 and 10 for a job whose only triggers are
dependencies (they fire on another job's end, never by the clock, and
ignore weekdays and windows). 11 and 13-15 are there when they apply (a
condition, a group, exclusive, the global limit set; a parent takes no
slot). 8-10 are written in heartbeats/core/triggers.py, 12 in
heartbeats/core/runs.py; 7, 11 and 13-15
in heartbeats/core/coordination.py, with the engine's rules
(runs/core/start.py).

The first check that fails is what holds the job back; a job with none
failing says when it runs next, or what starts it. A check whose facts are
unknown (None) is left out. Times go in `Check.at` (aware UTC), never into
the text, so each caller shows them in its reader's zone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from heartbeats.core.check import Check, Phrase, phrase, said
from heartbeats.core.coordination import (
    ChildrenFacts,
    ConditionFacts,
    ParentFacts,
    SlotsFacts,
    children_check,
    condition_check,
    parent_check,
    slot_checks,
)
from heartbeats.core.runs import QUEUED_STUCK_AFTER, WAITING_WORDS, RunFacts, active_runs_check
from heartbeats.core.triggers import TriggerFacts, compute_trigger_checks
from jobs.core.cron import gettext_noop

__all__ = [
    "QUEUED_STUCK_AFTER",
    "WAITING_WORDS",
    "BeatFacts",
    "Check",
    "Explanation",
    "JobFacts",
    "RunFacts",
    "TriggerFacts",
    "explain",
]


@dataclass(frozen=True)
class BeatFacts:
    name: str
    scheduler_enabled: bool


@dataclass(frozen=True)
class JobFacts:
    name: str
    enabled: bool
    triggers: tuple[TriggerFacts, ...] = ()
    beats: tuple[BeatFacts, ...] | None = None  # the live beats; None: unknown
    workers: int | None = None  # live workers; None: unknown
    celery_app: str = "scheduler_project"  # what `celery -A` names (the project's app)
    queue_paused: bool = False
    queue_pause_note: str = ""
    queue_paused_until: datetime | None = None
    maintenance: bool = False
    maintenance_note: str = ""
    maintenance_lock_file: str = ""  # the lock file's path, while it exists
    target: str = ""
    allowed_during_maintenance: bool = False  # its target is on the allow-list
    allow_list: tuple[str, ...] = ()  # the maintenance allow-list
    paused: bool = False
    pause_note: str = ""
    paused_until: datetime | None = None
    max_runs: int | None = None
    runs_done: int = 0
    parent: ParentFacts | None = None  # a child's parent
    children: ChildrenFacts | None = None  # a parent's children
    condition: ConditionFacts | None = None
    active_runs: tuple[RunFacts, ...] = ()
    overlap_policy: str = "skip"
    max_instances: int = 1
    slots: SlotsFacts | None = None  # None: it takes no slot, or unknown
    lock_holders: tuple[int, ...] = ()  # runs whose token holds a lock slot
    poll_s: float = 1.0
    lock_ttl_s: float = 30.0  # a running run without its lock for longer has lost its worker


@dataclass(frozen=True)
class Explanation:
    checks: tuple[Check, ...] = field(default_factory=tuple)
    next_run_at: datetime | None = None
    # What starts it when not only its own clock does: "when job 'Import'
    # (#3) ends succeeded", "as part of its parent 'Nightly' (#2)'s run".
    starts: object = ""  # a Phrase (str(): the English), or ""

    @property
    def holding_back(self) -> Check | None:
        """The first check that fails, if any."""
        return next((c for c in self.checks if not c.ok), None)

    @property
    def blocking_run_id(self) -> int | None:
        first = self.holding_back
        return first.run_id if first is not None else None

    def verdict(self, show: Callable[[datetime], str]) -> str:
        """One line, its time shown by `show` (the reader's zone)."""
        first = self.holding_back
        if first is not None:
            return f"held back by: {first.name} ({first.text(show)})"
        if self.next_run_at is not None:
            return f"nothing holds it back: {self.runs_next_words()} {show(self.next_run_at)}"
        if self.starts:
            return f"nothing holds it back: it runs {self.starts}"
        return "nothing holds it back"

    def runs_next_words(self) -> str:
        """The words before the next run's time in the verdict."""
        return f"it runs {self.starts}, next at" if self.starts else "it runs next at"


def explain(facts: JobFacts, *, now: datetime) -> Explanation:
    """The checklist for one job at `now` (aware)."""
    checks = [_enabled(facts)]
    checks += _beats(facts)
    checks.append(_queue(facts))
    checks.append(_maintenance(facts))
    checks.append(_pause(facts))
    if facts.parent is not None:
        checks.append(parent_check(facts.parent))
        soonest = facts.parent.next_run_at
        starts: object = phrase(
            gettext_noop("as part of its parent %(job)s's run"), job=facts.parent.job
        )
    else:
        if facts.children is not None:
            checks.append(children_check(facts.children))
        trigger_checks, soonest, starts = compute_trigger_checks(
            facts.triggers, poll_s=facts.poll_s, now=now
        )
        checks += trigger_checks
    if facts.condition is not None:
        checks.append(condition_check(facts.condition))
    checks.append(
        active_runs_check(
            facts.active_runs,
            overlap_policy=facts.overlap_policy,
            max_instances=facts.max_instances,
            lock_ttl_s=facts.lock_ttl_s,
            now=now,
        )
    )
    if facts.slots is not None:
        waiting = [(r.run_id, r.waiting_for) for r in facts.active_runs if r.waiting_for]
        checks += slot_checks(facts.slots, waiting)
    checks += _worker_and_lock(facts)
    return Explanation(tuple(checks), next_run_at=soonest, starts=starts)


def _enabled(facts: JobFacts) -> Check:
    if facts.enabled:
        return said("enabled", True, gettext_noop("yes"))
    if facts.max_runs and facts.runs_done >= facts.max_runs:
        return said(
            "enabled",
            False,
            gettext_noop(
                "disabled: it reached its run limit of %(max_runs)s runs"
                " (raise or clear the limit, then enable it)"
            ),
            max_runs=facts.max_runs,
        )
    if facts.parent is not None:
        return said(
            "enabled", False, gettext_noop("the job is disabled: its parent's runs skip it")
        )
    return said("enabled", False, gettext_noop("the job is disabled; Run now still works"))


def _beats(facts: JobFacts) -> list[Check]:
    if facts.beats is None:
        return []
    if not facts.beats:
        return [
            said(
                "beat",
                False,
                gettext_noop(
                    "no live beat: nothing is dispatched by schedule (start one: %(command)s)"
                ),
                command=f"celery -A {facts.celery_app} beat -S runs.beat:TaktScheduler",
            )
        ]
    on = [b.name for b in facts.beats if b.scheduler_enabled]
    off = [b.name for b in facts.beats if not b.scheduler_enabled]
    live = said(
        "beat",
        True,
        gettext_noop("%(count)s live: %(names)s"),
        count=len(facts.beats),
        names=", ".join(b.name for b in facts.beats),
    )
    if not on:
        detail = gettext_noop(
            "every live beat has its scheduler switched off (TAKT_SCHEDULER_ENABLED=false): %(off)s"
        )
        return [live, said("scheduler switch", False, detail, off=", ".join(off))]
    if off:
        switch = said(
            "scheduler switch",
            True,
            gettext_noop("on in %(on)s; off in %(off)s"),
            on=", ".join(on),
            off=", ".join(off),
        )
    else:
        switch = said("scheduler switch", True, gettext_noop("on in %(on)s"), on=", ".join(on))
    return [live, switch]


def _queue(facts: JobFacts) -> Check:
    if not facts.queue_paused:
        return said("queue", True, gettext_noop("running"))
    note = f": {facts.queue_pause_note}" if facts.queue_pause_note else ""
    until = _resumes_words(facts.queue_paused_until)
    if facts.allowed_during_maintenance:
        return said(
            "queue",
            True,
            gettext_noop(
                "the queue is paused%(note)s, but target %(target)s is on the maintenance"
                " allow-list: its runs start while the queue is paused%(until)s"
            ),
            at=facts.queue_paused_until,
            note=note,
            target=repr(facts.target),
            until=until,
        )
    return said(
        "queue",
        False,
        gettext_noop("the queue is paused%(note)s%(until)s"),
        at=facts.queue_paused_until,
        note=note,
        until=until,
    )


def _resumes_words(until: datetime | None) -> Phrase | str:
    """The words before the time a pause ends by itself, if it does."""
    return phrase(gettext_noop("; it resumes by itself at")) if until else ""


def _maintenance(facts: JobFacts) -> Check:
    if not facts.maintenance:
        return said("maintenance", True, gettext_noop("off"))
    source: Phrase | str = ""
    if facts.maintenance_note and facts.maintenance_lock_file:
        source = phrase(
            gettext_noop(" (%(note)s; the lock file %(path)s exists)"),
            note=facts.maintenance_note,
            path=facts.maintenance_lock_file,
        )
    elif facts.maintenance_lock_file:
        source = phrase(
            gettext_noop(" (the lock file %(path)s exists)"), path=facts.maintenance_lock_file
        )
    elif facts.maintenance_note:
        source = f" ({facts.maintenance_note})"
    if facts.allowed_during_maintenance:
        return said(
            "maintenance",
            True,
            gettext_noop(
                "maintenance mode is on%(source)s; target %(target)s is on the maintenance"
                " allow-list: its runs start"
            ),
            source=source,
            target=repr(facts.target),
        )
    listed = ", ".join(facts.allow_list) if facts.allow_list else phrase(gettext_noop("empty"))
    return said(
        "maintenance",
        False,
        gettext_noop(
            "maintenance mode is on%(source)s: target %(target)s is not on the maintenance"
            " allow-list (%(allowed)s), so every start is refused and recorded skipped"
            " (manage.py maintenance_mode off ends it)"
        ),
        source=source,
        target=repr(facts.target),
        allowed=listed,
    )


def _pause(facts: JobFacts) -> Check:
    if not facts.paused:
        return said("job pause", True, gettext_noop("not paused"))
    note = f": {facts.pause_note}" if facts.pause_note else ""
    return said(
        "job pause",
        False,
        gettext_noop("paused%(note)s%(until)s"),
        at=facts.paused_until,
        note=note,
        until=_resumes_words(facts.paused_until),
    )


def _worker_and_lock(facts: JobFacts) -> list[Check]:
    checks = []
    if facts.workers is not None:
        checks.append(
            said("worker", True, gettext_noop("%(count)s live"), count=facts.workers)
            if facts.workers
            else said(
                "worker",
                False,
                gettext_noop("no live worker: runs are queued but nothing executes them"),
            )
        )
    active = {r.run_id for r in facts.active_runs if r.status == "running"}
    stale = [run_id for run_id in facts.lock_holders if run_id not in active]
    if stale:
        checks.append(
            said(
                "lock",
                False,
                gettext_noop(
                    "held by run #%(run)s, which is not running (the lock lapses after its TTL)"
                ),
                run_id=stale[0],
                run=stale[0],
            )
        )
    elif facts.lock_holders:
        checks.append(
            said("lock", True, gettext_noop("held by run #%(run)s"), run=facts.lock_holders[0])
        )
    else:
        checks.append(said("lock", True, gettext_noop("free")))
    return checks
