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
slot). 8-10 are written in heartbeats/core/triggers.py; 7, 11 and 13-15
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
from datetime import datetime, timedelta

from heartbeats.core.check import Check
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
from heartbeats.core.triggers import TriggerFacts, compute_trigger_checks

__all__ = [
    "BeatFacts",
    "Check",
    "Explanation",
    "JobFacts",
    "RunFacts",
    "TriggerFacts",
    "explain",
]

# A queued, published run that no worker started for this long is stuck.
QUEUED_STUCK_AFTER = timedelta(seconds=60)

# What a held run waits for besides its job (Run.waiting_for), in words.
WAITING_WORDS = {
    "group": "waiting for a slot of its concurrency group",
    "exclusive": "waiting for every group to drain (exclusive)",
    "limit": "waiting for a slot under TAKT_MAX_CONCURRENCY",
}


@dataclass(frozen=True)
class BeatFacts:
    name: str
    scheduler_enabled: bool


@dataclass(frozen=True)
class RunFacts:
    """An active run of the job: `since` is when it started (running) or
    when it was due (queued)."""

    run_id: int
    status: str  # "queued" or "running"
    since: datetime
    worker: str = ""
    lock_alive: bool = True  # running: its worker still holds the job's lock
    held: bool = False  # queued: waiting for the running run (buffer policies), or a slot
    waiting_for: str = ""  # held for a slot: "group", "exclusive" or "limit"
    # A parent's running run (F-04) holds no lock while its children run:
    # its active child run, in words ("run #42 of job 'Import' (#4), queued").
    child: str = ""


@dataclass(frozen=True)
class JobFacts:
    name: str
    enabled: bool
    triggers: tuple[TriggerFacts, ...] = ()
    beats: tuple[BeatFacts, ...] | None = None  # the live beats; None: unknown
    workers: int | None = None  # live workers; None: unknown
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
    starts: str = ""

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
        starts = f"as part of its parent {facts.parent.job}'s run"
    else:
        if facts.children is not None:
            checks.append(children_check(facts.children))
        trigger_checks, soonest, starts = compute_trigger_checks(
            facts.triggers, poll_s=facts.poll_s, now=now
        )
        checks += trigger_checks
    if facts.condition is not None:
        checks.append(condition_check(facts.condition))
    checks.append(_active_runs(facts, now=now))
    if facts.slots is not None:
        waiting = [(r.run_id, r.waiting_for) for r in facts.active_runs if r.waiting_for]
        checks += slot_checks(facts.slots, waiting)
    checks += _worker_and_lock(facts)
    return Explanation(tuple(checks), next_run_at=soonest, starts=starts)


def _enabled(facts: JobFacts) -> Check:
    if facts.enabled:
        return Check("enabled", True, "yes")
    if facts.max_runs and facts.runs_done >= facts.max_runs:
        return Check(
            "enabled",
            False,
            f"disabled: it reached its run limit of {facts.max_runs} runs"
            " (raise or clear the limit, then enable it)",
        )
    if facts.parent is not None:
        return Check("enabled", False, "the job is disabled: its parent's runs skip it")
    return Check("enabled", False, "the job is disabled; Run now still works")


def _beats(facts: JobFacts) -> list[Check]:
    if facts.beats is None:
        return []
    if not facts.beats:
        return [
            Check(
                "beat",
                False,
                "no live beat: nothing is dispatched by schedule"
                " (start one: celery -A scheduler_project beat -S runs.beat:TaktScheduler)",
            )
        ]
    on = [b.name for b in facts.beats if b.scheduler_enabled]
    off = [b.name for b in facts.beats if not b.scheduler_enabled]
    live = Check(
        "beat", True, f"{len(facts.beats)} live: " + ", ".join(b.name for b in facts.beats)
    )
    if not on:
        detail = "every live beat has its scheduler switched off (TAKT_SCHEDULER_ENABLED=false): "
        return [live, Check("scheduler switch", False, detail + ", ".join(off))]
    detail = "on in " + ", ".join(on) + (f"; off in {', '.join(off)}" if off else "")
    return [live, Check("scheduler switch", True, detail)]


def _queue(facts: JobFacts) -> Check:
    if not facts.queue_paused:
        return Check("queue", True, "running")
    note = f": {facts.queue_pause_note}" if facts.queue_pause_note else ""
    until = "; it resumes by itself at" if facts.queue_paused_until else ""
    if facts.allowed_during_maintenance:
        return Check(
            "queue",
            True,
            f"the queue is paused{note}, but target {facts.target!r} is on the maintenance"
            f" allow-list: its runs start while the queue is paused{until}",
            at=facts.queue_paused_until,
        )
    return Check("queue", False, f"the queue is paused{note}{until}", at=facts.queue_paused_until)


def _maintenance(facts: JobFacts) -> Check:
    if not facts.maintenance:
        return Check("maintenance", True, "off")
    why = [facts.maintenance_note] if facts.maintenance_note else []
    if facts.maintenance_lock_file:
        why.append(f"the lock file {facts.maintenance_lock_file} exists")
    source = f" ({'; '.join(why)})" if why else ""
    if facts.allowed_during_maintenance:
        return Check(
            "maintenance",
            True,
            f"maintenance mode is on{source}; target {facts.target!r} is on the maintenance"
            " allow-list: its runs start",
        )
    listed = ", ".join(facts.allow_list) if facts.allow_list else "empty"
    return Check(
        "maintenance",
        False,
        f"maintenance mode is on{source}: target {facts.target!r} is not on the maintenance"
        f" allow-list ({listed}), so every start is refused and recorded skipped"
        " (manage.py maintenance_mode off ends it)",
    )


def _pause(facts: JobFacts) -> Check:
    if not facts.paused:
        return Check("job pause", True, "not paused")
    note = f": {facts.pause_note}" if facts.pause_note else ""
    until = "; it resumes by itself at" if facts.paused_until else ""
    return Check("job pause", False, f"paused{note}{until}", at=facts.paused_until)


def _active_runs(facts: JobFacts, *, now: datetime) -> Check:
    running = [r for r in facts.active_runs if r.status == "running"]
    waiting = [r for r in facts.active_runs if r.status == "queued"]
    limit = facts.max_instances if facts.overlap_policy == "allow" else 1
    busy = len(running) + len(waiting) >= limit and facts.overlap_policy != "cancel_other"
    if not facts.active_runs:
        return Check("active runs", True, "none")
    if not busy:
        return Check(
            "active runs",
            True,
            f"{len(running)} running, {len(waiting)} waiting;"
            f" overlap policy '{facts.overlap_policy}' lets a new run start",
        )
    return _blocking(facts, running, waiting, now=now)


def _worker_and_lock(facts: JobFacts) -> list[Check]:
    checks = []
    if facts.workers is not None:
        checks.append(
            Check("worker", True, f"{facts.workers} live")
            if facts.workers
            else Check("worker", False, "no live worker: runs are queued but nothing executes them")
        )
    active = {r.run_id for r in facts.active_runs if r.status == "running"}
    stale = [run_id for run_id in facts.lock_holders if run_id not in active]
    if stale:
        checks.append(
            Check(
                "lock",
                False,
                f"held by run #{stale[0]}, which is not running (the lock lapses after its TTL)",
                run_id=stale[0],
            )
        )
    else:
        holder = f"held by run #{facts.lock_holders[0]}" if facts.lock_holders else "free"
        checks.append(Check("lock", True, holder))
    return checks


def _blocking(
    facts: JobFacts, running: list[RunFacts], waiting: list[RunFacts], *, now: datetime
) -> Check:
    """The active run that holds new runs back, named, with what happens to
    the next fire time under the job's overlap policy."""
    effect = {
        "skip": "the next fire time is recorded as skipped",
        "buffer_one": "the next run waits until it ends",
        "buffer_all": "new runs wait until it ends",
        "allow": f"all {facts.max_instances} allowed runs are taken",
    }.get(facts.overlap_policy, "a new run waits")
    if running:
        run = min(running, key=lambda r: r.since)
        if run.child:
            detail = (
                f"run #{run.run_id} runs its children (now {run.child}); {effect}; running since"
            )
            return Check("active runs", False, detail, at=run.since, run_id=run.run_id)
        where = f" on {run.worker}" if run.worker else ""
        # A run takes its lock just after it starts: only a lock missing for
        # longer than its lease says the worker is gone.
        gone = not run.lock_alive and now - run.since > timedelta(seconds=facts.lock_ttl_s)
        state = "; its worker is gone (its lock lapsed): it is recovered as lost" if gone else ""
        detail = f"run #{run.run_id} is running{where}{state}; {effect}; running since"
        return Check("active runs", False, detail, at=run.since, run_id=run.run_id)
    run = min(waiting, key=lambda r: r.since)
    stuck = "" if run.held or now - run.since < QUEUED_STUCK_AFTER else "; no worker has started it"
    held = ""
    if run.held:
        slot = WAITING_WORDS.get(run.waiting_for)
        held = f" (held, {slot})" if slot else " (held)"
    detail = f"run #{run.run_id} is queued{held}{stuck}; {effect}; due since"
    return Check("active runs", False, detail, at=run.since, run_id=run.run_id)
