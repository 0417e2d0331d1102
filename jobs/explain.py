""" "Why didn't it run?" (F-66): the checklist an operator walks, as a pure
function of the facts about one job at `now`. Part of the pure core: no
Django, no clock reads. runs/explaining.py gathers the facts;
`manage.py explain_job <id>` and the job editor in the admin print the
answer.

The checks, in the order the scheduler applies them: the job is enabled;
the scheduler runs on this instance (TAKT_SCHEDULER_ENABLED); the queue is
not paused; the job is not paused; it has an active trigger; the trigger's
weekday and time window allow now; a fire time is due; the job is not busy
(its overlap policy would hold a new run back); its lock is free. The first
check that fails is what holds the job back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class TriggerFacts:
    description: str
    active: bool
    next_run_at: datetime | None
    allowed_now: bool  # weekdays, window and excluded days allow `now`


@dataclass(frozen=True)
class JobFacts:
    name: str
    enabled: bool
    scheduler_enabled: bool
    queue_paused: bool
    queue_pause_note: str = ""
    paused: bool = False
    pause_note: str = ""
    paused_until: datetime | None = None
    triggers: tuple[TriggerFacts, ...] = ()
    running: int = 0
    waiting: int = 0
    overlap_policy: str = "skip"
    max_instances: int = 1
    lock_held: bool = False


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Explanation:
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def holding_back(self) -> Check | None:
        """The first check that fails, if any."""
        return next((c for c in self.checks if not c.ok), None)

    @property
    def verdict(self) -> str:
        first = self.holding_back
        if first is None:
            return "nothing holds the job back"
        return f"held back by: {first.name} ({first.detail})"


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "never"


def explain(facts: JobFacts, *, now: datetime) -> Explanation:
    """The checklist for one job at `now` (aware)."""
    checks = [
        Check("enabled", facts.enabled, "yes" if facts.enabled else "the job is disabled"),
        Check(
            "scheduler on this instance",
            facts.scheduler_enabled,
            "on" if facts.scheduler_enabled else "TAKT_SCHEDULER_ENABLED is off for this process",
        ),
        Check(
            "queue",
            not facts.queue_paused,
            "running"
            if not facts.queue_paused
            else f"the queue is paused{': ' + facts.queue_pause_note if facts.queue_pause_note else ''}",
        ),
        Check("job pause", not facts.paused, _pause_detail(facts)),
    ]
    active = [t for t in facts.triggers if t.active]
    checks.append(
        Check(
            "trigger",
            bool(active),
            f"{len(active)} active: " + "; ".join(t.description for t in active)
            if active
            else "no enabled trigger (it runs only when started by hand or by the API)",
        )
    )
    if active:
        allowed = [t for t in active if t.allowed_now]
        checks.append(
            Check(
                "weekday and time window",
                bool(allowed),
                "now is allowed"
                if allowed
                else "now is outside every trigger's weekdays, window or excluded days",
            )
        )
        upcoming = [t.next_run_at for t in active if t.next_run_at is not None]
        soonest = min(upcoming) if upcoming else None
        due = soonest is not None and soonest <= now
        checks.append(
            Check(
                "due",
                due,
                f"due since {_when(soonest)}" if due else f"next fire time {_when(soonest)}",
            )
        )
    limit = facts.max_instances if facts.overlap_policy == "allow" else 1
    busy = facts.running + facts.waiting >= limit and facts.overlap_policy != "cancel_other"
    checks.append(
        Check(
            "overlap",
            not busy,
            f"{facts.running} running, {facts.waiting} waiting (overlap policy"
            f" '{facts.overlap_policy}')",
        )
    )
    checks.append(
        Check(
            "lock",
            not facts.lock_held or facts.overlap_policy in ("allow", "cancel_other"),
            "held by a running run" if facts.lock_held else "free",
        )
    )
    return Explanation(tuple(checks))


def _pause_detail(facts: JobFacts) -> str:
    if not facts.paused:
        return "not paused"
    until = f" until {_when(facts.paused_until)}" if facts.paused_until else ""
    return f"paused{until}{': ' + facts.pause_note if facts.pause_note else ''}"
