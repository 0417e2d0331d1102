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

from heartbeats.core.check import Check, Joined, Phrase, or_phrase, phrase, said, status_phrase
from jobs.core.cron import gettext_noop

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
    upstream_last: object = ""  # "its last run #40 ended failed" (a Phrase, or text)


def compute_trigger_checks(
    triggers: Sequence[TriggerFacts], *, poll_s: float, now: datetime
) -> tuple[list[Check], datetime | None, object]:
    """The trigger checks of a job with these triggers; with the soonest
    fire time, and what else starts the job (its dependencies, when it has
    no clock trigger)."""
    checks: list[Check] = []
    enabled = [t for t in triggers if t.enabled]
    clock = [t for t in enabled if not t.upstream]
    after = [t for t in enabled if t.upstream]
    soonest = min((t.next_run_at for t in clock if t.next_run_at), default=None)
    if not enabled:
        detail = gettext_noop(
            "no enabled trigger (it runs only when started by hand, the API or enqueue_job)"
        )
        checks.append(said("trigger", False, detail))
        return checks, None, ""
    parts = [t.description for t in clock] + [_after_words(t) for t in after]
    checks.append(
        said(
            "trigger",
            True,
            gettext_noop("%(count)s enabled: %(triggers)s"),
            count=len(enabled),
            triggers=Joined(tuple(parts), "; "),
        )
    )
    if not clock:
        return checks, None, or_phrase([starts_when(t) for t in after])
    allowed = any(t.allowed_now for t in clock)
    checks.append(
        said("weekday and time window", True, gettext_noop("now is allowed"))
        if allowed
        else said(
            "weekday and time window",
            False,
            gettext_noop(
                "now is outside every trigger's weekdays, time window or excluded days;"
                " next fire time"
            ),
            at=soonest,
        )
    )
    checks.append(_next_fire(soonest, poll_s=poll_s, now=now))
    return checks, soonest, ""


def starts_when(trigger: TriggerFacts) -> Phrase:
    """A dependency in words: "when job 'Import' (#3) ends succeeded"."""
    return phrase(
        gettext_noop("when job %(job)s ends %(statuses)s"),
        job=trigger.upstream,
        statuses=status_phrase(trigger.statuses),
    )


def _after_words(trigger: TriggerFacts) -> Phrase:
    if trigger.upstream_last:
        return phrase(
            gettext_noop("starts %(when)s (%(last)s)"),
            when=starts_when(trigger),
            last=trigger.upstream_last,
        )
    return phrase(gettext_noop("starts %(when)s"), when=starts_when(trigger))


def _next_fire(soonest: datetime | None, *, poll_s: float, now: datetime) -> Check:
    if soonest is None:
        return said("next fire time", False, gettext_noop("none: no enabled trigger fires again"))
    late = now - soonest
    if late > OVERDUE_AFTER + timedelta(seconds=2 * poll_s):
        return said(
            "next fire time",
            False,
            gettext_noop(
                "overdue: due since this time but not dispatched (is a beat running and"
                " reaching the database?)"
            ),
            at=soonest,
        )
    if late >= timedelta(0):
        return said("next fire time", True, gettext_noop("due now"), at=soonest)
    return said("next fire time", True, gettext_noop("at"), at=soonest)
