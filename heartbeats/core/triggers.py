"""The trigger checks of "Why didn't it run?" (F-66): does the job have an
enabled trigger (a dependency says which job's end starts it, F-33), do
the weekdays, windows and excluded days of its clock triggers allow now,
and is its next fire time overdue. Pure, like heartbeats/core/explain.py,
which puts them in their place in the checklist. A dependency has no fire
times and ignores weekdays and windows: a job whose only triggers are
dependencies gets no window or fire time check, and "starts when …"
instead of a next run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from heartbeats.core.check import Check, or_words, status_words

# A fire time this much past due (beyond two polls) without a run is overdue.
OVERDUE_AFTER = timedelta(seconds=5)


@dataclass(frozen=True)
class TriggerFacts:
    description: str
    enabled: bool  # the trigger's own switch (not the job's)
    next_run_at: datetime | None
    allowed_now: bool  # weekdays, window and excluded days allow `now`
    # A dependency (F-33): the upstream job in words, "'Import' (#3)"; "" for
    # a clock trigger. It fires when a run of that job ends in `statuses`.
    upstream: str = ""
    statuses: tuple[str, ...] = ()
    upstream_last: str = ""  # "its last run #40 ended failed"


def compute_trigger_checks(
    triggers: Sequence[TriggerFacts], *, poll_s: float, now: datetime
) -> tuple[list[Check], datetime | None, str]:
    """The trigger checks of a job with these triggers; with the soonest
    fire time, and what else starts the job (its dependencies, when it has
    no clock trigger)."""
    checks: list[Check] = []
    enabled = [t for t in triggers if t.enabled]
    clock = [t for t in enabled if not t.upstream]
    after = [t for t in enabled if t.upstream]
    soonest = min((t.next_run_at for t in clock if t.next_run_at), default=None)
    if not enabled:
        detail = "no enabled trigger (it runs only when started by hand, the API or enqueue_job)"
        checks.append(Check("trigger", False, detail))
        return checks, None, ""
    parts = [t.description for t in clock] + [_after_words(t) for t in after]
    checks.append(Check("trigger", True, f"{len(enabled)} enabled: " + "; ".join(parts)))
    if not clock:
        return checks, None, or_words([starts_when(t) for t in after])
    allowed = any(t.allowed_now for t in clock)
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
    checks.append(_next_fire(soonest, poll_s=poll_s, now=now))
    return checks, soonest, ""


def starts_when(trigger: TriggerFacts) -> str:
    """A dependency in words: "when job 'Import' (#3) ends succeeded"."""
    return f"when job {trigger.upstream} ends {status_words(trigger.statuses)}"


def _after_words(trigger: TriggerFacts) -> str:
    last = f" ({trigger.upstream_last})" if trigger.upstream_last else ""
    return f"starts {starts_when(trigger)}{last}"


def _next_fire(soonest: datetime | None, *, poll_s: float, now: datetime) -> Check:
    if soonest is None:
        return Check("next fire time", False, "none: no enabled trigger fires again")
    late = now - soonest
    if late > OVERDUE_AFTER + timedelta(seconds=2 * poll_s):
        return Check(
            "next fire time",
            False,
            "overdue: due since this time but not dispatched (is a beat running and reaching"
            " the database?)",
            at=soonest,
        )
    return Check("next fire time", True, "due now" if late >= timedelta(0) else "at", at=soonest)
