""" "Why didn't it run?" (F-66): the checklist an operator walks, as a pure
function of the facts about one job at `now`. Part of the pure core: no
Django, no clock reads. runs/explaining.py gathers the facts;
`manage.py explain_job <id>` and the job editor in the admin print the
answer.

The checks, in the order the scheduler applies them:

 1. enabled           the job is enabled (a run limit that was reached disables it)
 2. beat              a beat is alive (its heartbeat is within its deadline)
 3. scheduler switch  at least one live beat dispatches by schedule (TAKT_SCHEDULER_ENABLED)
 4. queue             the queue is not paused
 5. maintenance       maintenance mode is off, or the job is allowed during it
 6. job pause         the job is not paused
 7. trigger           the job has an enabled trigger
 8. weekday and time window   now is allowed by some trigger
 9. next fire time    it has one, and it is not overdue
10. active runs       no active run holds a new run back (overlap policy)
11. worker            a worker is alive to execute runs
12. lock              the job's lock is not held by a run that is not running

The first check that fails is what holds the job back; a job with none
failing says when it runs next. A check whose facts are unknown (None) is
left out. Times go in `Check.at` (aware UTC), never into the text, so each
caller shows them in its reader's zone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# A fire time this much past due (beyond two polls) without a run is overdue.
OVERDUE_AFTER = timedelta(seconds=5)
# A queued, published run that no worker started for this long is stuck.
QUEUED_STUCK_AFTER = timedelta(seconds=60)


@dataclass(frozen=True)
class TriggerFacts:
    description: str
    enabled: bool  # the trigger's own switch (not the job's)
    next_run_at: datetime | None
    allowed_now: bool  # weekdays, window and excluded days allow `now`


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
    held: bool = False  # queued: waiting for the running run (buffer policies)


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
    allowed_during_maintenance: bool = False
    paused: bool = False
    pause_note: str = ""
    paused_until: datetime | None = None
    max_runs: int | None = None
    runs_done: int = 0
    active_runs: tuple[RunFacts, ...] = ()
    overlap_policy: str = "skip"
    max_instances: int = 1
    lock_holders: tuple[int, ...] = ()  # runs whose token holds a lock slot
    poll_s: float = 1.0
    lock_ttl_s: float = 30.0  # a running run without its lock for longer has lost its worker


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    at: datetime | None = None  # the moment the detail speaks of, if any
    run_id: int | None = None  # the run it names (the admin offers to cancel it)

    def text(self, show: Callable[[datetime], str]) -> str:
        """The detail with its time shown by `show` (the reader's zone)."""
        return f"{self.detail} {show(self.at)}" if self.at is not None else self.detail


@dataclass(frozen=True)
class Explanation:
    checks: tuple[Check, ...] = field(default_factory=tuple)
    next_run_at: datetime | None = None

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
            return f"nothing holds it back: it runs next at {show(self.next_run_at)}"
        return "nothing holds it back"


def explain(facts: JobFacts, *, now: datetime) -> Explanation:
    """The checklist for one job at `now` (aware)."""
    checks = [_enabled(facts)]
    checks += _beats(facts)
    checks.append(_queue(facts))
    if facts.maintenance:
        checks.append(_maintenance(facts))
    checks.append(_pause(facts))
    enabled = [t for t in facts.triggers if t.enabled]
    soonest = min((t.next_run_at for t in enabled if t.next_run_at), default=None)
    checks.append(
        Check(
            "trigger",
            bool(enabled),
            f"{len(enabled)} enabled: " + "; ".join(t.description for t in enabled)
            if enabled
            else "no enabled trigger (it runs only when started by hand, the API or enqueue_job)",
        )
    )
    if enabled:
        allowed = any(t.allowed_now for t in enabled)
        checks.append(
            Check(
                "weekday and time window",
                allowed,
                "now is allowed"
                if allowed
                else "now is outside every trigger's weekdays, time window or excluded days;"
                " next fire time",
                at=None if allowed else soonest,
            )
        )
        checks.append(_next_fire(facts, soonest, now=now))
    checks += _runs(facts, now=now)
    return Explanation(tuple(checks), next_run_at=soonest)


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
    return Check("queue", False, f"the queue is paused{note}{until}", at=facts.queue_paused_until)


def _maintenance(facts: JobFacts) -> Check:
    if facts.allowed_during_maintenance:
        return Check("maintenance", True, "maintenance mode is on; this job is allowed during it")
    return Check(
        "maintenance",
        False,
        "maintenance mode is on: only jobs allowed during maintenance start"
        " (manage.py maintenance_mode off ends it)",
    )


def _pause(facts: JobFacts) -> Check:
    if not facts.paused:
        return Check("job pause", True, "not paused")
    note = f": {facts.pause_note}" if facts.pause_note else ""
    until = "; it resumes by itself at" if facts.paused_until else ""
    return Check("job pause", False, f"paused{note}{until}", at=facts.paused_until)


def _next_fire(facts: JobFacts, soonest: datetime | None, *, now: datetime) -> Check:
    if soonest is None:
        return Check("next fire time", False, "none: no enabled trigger fires again")
    late = now - soonest
    if late > OVERDUE_AFTER + timedelta(seconds=2 * facts.poll_s):
        return Check(
            "next fire time",
            False,
            "overdue: due since this time but not dispatched (is a beat running and reaching"
            " the database?)",
            at=soonest,
        )
    return Check("next fire time", True, "due now" if late >= timedelta(0) else "at", at=soonest)


def _runs(facts: JobFacts, *, now: datetime) -> list[Check]:
    checks = []
    running = [r for r in facts.active_runs if r.status == "running"]
    waiting = [r for r in facts.active_runs if r.status == "queued"]
    limit = facts.max_instances if facts.overlap_policy == "allow" else 1
    busy = len(running) + len(waiting) >= limit and facts.overlap_policy != "cancel_other"
    if not facts.active_runs:
        checks.append(Check("active runs", True, "none"))
    elif not busy:
        checks.append(
            Check(
                "active runs",
                True,
                f"{len(running)} running, {len(waiting)} waiting;"
                f" overlap policy '{facts.overlap_policy}' lets a new run start",
            )
        )
    else:
        checks.append(_blocking(facts, running, waiting, now=now))
    if facts.workers is not None:
        checks.append(
            Check("worker", True, f"{facts.workers} live")
            if facts.workers
            else Check("worker", False, "no live worker: runs are queued but nothing executes them")
        )
    active = {r.run_id for r in running}
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
        where = f" on {run.worker}" if run.worker else ""
        # A run takes its lock just after it starts: only a lock missing for
        # longer than its lease says the worker is gone.
        gone = not run.lock_alive and now - run.since > timedelta(seconds=facts.lock_ttl_s)
        state = "; its worker is gone (its lock lapsed): it is recovered as lost" if gone else ""
        detail = f"run #{run.run_id} is running{where}{state}; {effect}; running since"
        return Check("active runs", False, detail, at=run.since, run_id=run.run_id)
    run = min(waiting, key=lambda r: r.since)
    stuck = "" if run.held or now - run.since < QUEUED_STUCK_AFTER else "; no worker has started it"
    detail = (
        f"run #{run.run_id} is queued{' (held)' if run.held else ''}{stuck}; {effect}; due since"
    )
    return Check("active runs", False, detail, at=run.since, run_id=run.run_id)
