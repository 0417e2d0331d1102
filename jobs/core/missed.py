"""The claim decision: what the beat does with a due trigger (F-20, F-21,
F-24, F-28, F-102). Part of the pure core: no Django, no Celery, no clock reads.

A claim happens in two steps:

1. `compute_due_window` (jobs/core/due.py) gathers the facts: the due fire
   times in [next_run_at, now] (the stored next_run_at, the latest, how
   many, with the count bounded by max_scan) and the first fire time after now.
2. `compute_missed_runs`, the one decision function, turns the window and the
   job's `MissedRunRules` into a `Claim`: the runs to create, oldest first, and
   the fire times skipped without a run.

The rules apply to the due fire times in this order:

1. coalesce_until: the fire times at or before it become ONE run for the
   latest of them (`missed` counts the others), whatever the grace, window and
   policy. After a queue pause is lifted the beat passes the moment of the
   resume: paused due times stay due and are caught up once (F-28); a fire
   time held by a pause was not missed by the scheduler, so the window does
   not drop it. The run is `schedule` when it stands for one on-time fire
   time, else `catchup`. Passing the same moment again later is harmless: it
   affects only fire times at or before it.
2. grace: the LATEST due fire time, if at most `grace` old (now - fire <=
   grace), is on time and gets an ordinary `schedule` run whatever the window
   and policy. Every earlier due fire time is missed, however recent: a newer
   fire time came before any beat dispatched it (a 1-second trigger whose
   beat stalled for 5 s missed 4 fire times, it does not owe 5 runs).
3. window: a missed fire time older than `window` (now - fire > window) is
   skipped, whatever the policy. None: no limit.
4. policy, over the missed fire times inside the window (runs are `catchup`):

   ========  ==================================================================
   skip      no run; all are skipped. next_run_at jumps past now as always.
   run_once  one run, for the latest (pick `latest`, default) or the earliest
             (pick `earliest`) of them; the others are skipped. With an
             on-time fire time beside them (rule 2) it is still ONE run:
             `latest` runs the on-time latest fire time as a catch-up run
             that stands for the missed one, `earliest` runs the earliest
             missed one and skips the latest (after an outage or a
             re-enable, run_once means one run for all that was due).
   run_all   a run for each, oldest first, at most max_runs. When more were
             missed the LATEST max_runs run and the older ones are skipped:
             the freshest data matters most, and the cap keeps a long outage
             from flooding the workers with a burst of runs.
   ========  ==================================================================

Every due fire time is accounted for exactly once: it is a run's
scheduled_for, or coalesced into a run (`PlannedRun.missed`), or skipped
(`Claim.skipped_times`, with `skipped_first`/`skipped_last` so the beat can
record one visible `skipped` run: "N fire times from X to Y were missed and
skipped", F-102). Counts stop at max_scan (`Claim.truncated`: they are lower
bounds then). Runs and the edges of each group come from forward and reverse
searches, so a 1-second cron missed for a month costs at most a few max_scan
steps, never a walk over the gap.

`compute_claim(..., rules=None)` keeps the behaviour from before the rules:
everything due is coalesced into one run for the latest fire time, `catchup`
when it stands for more than one (`MissedRunRules(grace=timedelta.max,
coalesce_until=now)`). A caller passing rules must create one Run per
`Claim.runs` entry (trigger `catchup`/`schedule` from `catchup`, missed_count
from `missed`) and, when `skipped_times` > 0, one `skipped` record; the
`scheduled_for`, `missed` and `catchup` properties are the totals for the
trigger row (last_fired_at, missed_count).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import assert_never

from jobs.core.cron import gettext_noop
from jobs.core.due import DEFAULT_MAX_SCAN, TINY, DueTimes, DueWindow, compute_due_window
from jobs.core.rules import Overlap
from jobs.core.triggers import (
    RUN_ANCHORS,
    IntervalAnchor,
    IntervalSpec,
    TriggerError,
    TriggerSpec,
    compute_next_fire,
)

MAX_RUNS_LIMIT = 1000
_ZERO = timedelta(0)


class MissedRunPolicy(StrEnum):
    # Missed fire times get no run (counted as skipped); the trigger jumps to
    # the first fire time after now.
    SKIP = "skip"
    # One catch-up run for one missed fire time (see CatchupPick); the other
    # missed ones are skipped. The default.
    RUN_ONCE = "run_once"
    # A catch-up run for every missed fire time, at most max_runs (the latest).
    RUN_ALL = "run_all"


class CatchupPick(StrEnum):
    # run_once runs the latest missed fire time. The default.
    LATEST = "latest"
    # run_once runs the earliest missed fire time inside the window.
    EARLIEST = "earliest"


@dataclass(frozen=True)
class MissedRunRules:
    """How a claim treats fire times the scheduler missed (see the module
    docstring for the order in which the rules apply)."""

    policy: MissedRunPolicy = MissedRunPolicy.RUN_ONCE
    pick: CatchupPick = CatchupPick.LATEST
    # run_all runs at most this many missed fire times (1..1000); it also caps
    # the on-time runs of one claim.
    max_runs: int = 10
    # A fire time missed longer ago than this is skipped; None: no limit.
    window: timedelta | None = None
    # A fire time at most this old is on time, not missed.
    grace: timedelta = timedelta(seconds=60)
    # Fire times at or before this moment (aware) are coalesced into one run.
    coalesce_until: datetime | None = None


@dataclass(frozen=True)
class PlannedRun:
    """One run to create for a claimed trigger. Aware UTC."""

    scheduled_for: datetime
    # True: trigger `catchup` (a missed fire time, or one standing for several);
    # False: an on-time `schedule` run.
    catchup: bool
    # Other due fire times coalesced into this run (counted, at most max_scan).
    missed: int = 0


@dataclass(frozen=True)
class Claim:
    """What to do with a due trigger. Datetimes are aware UTC."""

    # The runs to create, oldest first; empty: nothing to run.
    runs: tuple[PlannedRun, ...]
    # The trigger's new next_run_at; None: the trigger is finished, or it waits
    # for the worker (interval from_start/from_finish with a run planned).
    next_run_at: datetime | None
    # Due fire times passed over with no run and not coalesced into one
    # (window, skip, run_once's others, run_all's cap), at most max_scan; and
    # the earliest and latest of them (a planned run may lie between).
    skipped_times: int = 0
    skipped_first: datetime | None = None
    skipped_last: datetime | None = None
    # A count stopped at max_scan: missed counts and skipped_times are lower bounds.
    truncated: bool = False

    @property
    def scheduled_for(self) -> datetime | None:
        """The latest planned fire time (the trigger's last_fired_at); None: no run."""
        return self.runs[-1].scheduled_for if self.runs else None

    @property
    def missed(self) -> int:
        """Due fire times without a run of their own: coalesced plus skipped."""
        return sum(run.missed for run in self.runs) + self.skipped_times

    @property
    def catchup(self) -> bool:
        """True when any planned run is a catch-up run."""
        return any(run.catchup for run in self.runs)


def _is_duration(value: object) -> bool:
    return isinstance(value, timedelta) and value >= _ZERO


def validate_missed_run_rules(rules: MissedRunRules) -> MissedRunRules:
    """Check missed-run rules and return a normalized copy (enum members,
    coalesce_until in UTC). A window shorter than the grace is allowed: on-time
    fire times run anyway.

    Raises TriggerError naming the field: "missed_run_policy", "catchup_pick"
    (unknown member), "catchup_max_runs" (outside 1..1000), "catchup_window_s"
    (negative), "misfire_grace_s" (negative), "coalesce_until" (naive).
    """
    if rules.policy not in MissedRunPolicy.__members__.values():
        raise TriggerError(
            "missed_run_policy", gettext_noop("unknown policy %(policy)r"), policy=rules.policy
        )
    if rules.pick not in CatchupPick.__members__.values():
        raise TriggerError("catchup_pick", gettext_noop("unknown pick %(pick)r"), pick=rules.pick)
    max_runs = rules.max_runs
    if not isinstance(max_runs, int) or isinstance(max_runs, bool):
        raise TriggerError(
            "catchup_max_runs",
            gettext_noop("must be a whole number, got %(max_runs)r"),
            max_runs=max_runs,
        )
    if not 1 <= max_runs <= MAX_RUNS_LIMIT:
        raise TriggerError(
            "catchup_max_runs",
            gettext_noop("must be between 1 and %(max_runs_limit)s, got %(max_runs)s"),
            max_runs_limit=MAX_RUNS_LIMIT,
            max_runs=max_runs,
        )
    if rules.window is not None and not _is_duration(rules.window):
        raise TriggerError(
            "catchup_window_s",
            gettext_noop("must be 0 seconds or more, got %(window)r"),
            window=rules.window,
        )
    if not _is_duration(rules.grace):
        raise TriggerError(
            "misfire_grace_s",
            gettext_noop("must be 0 seconds or more, got %(grace)r"),
            grace=rules.grace,
        )
    until = rules.coalesce_until
    if until is not None:
        if not isinstance(until, datetime) or until.utcoffset() is None:
            raise TriggerError(
                "coalesce_until", gettext_noop("must be a timezone-aware date and time")
            )
        until = until.astimezone(UTC)
    return replace(
        rules,
        policy=MissedRunPolicy(rules.policy),
        pick=CatchupPick(rules.pick),
        coalesce_until=until,
    )


def _before(moment: datetime, age: timedelta) -> datetime | None:
    """moment - age; None when that lies before datetime.min (no limit)."""
    try:
        return moment - age
    except OverflowError:
        return None


def _later_of(first: datetime | None, second: datetime | None) -> datetime | None:
    """The later of two lower bounds; None is no bound."""
    if first is None or second is None:
        return second if first is None else first
    return max(first, second)


@dataclass
class _Skipped:
    count: int = 0
    first: datetime | None = None
    last: datetime | None = None
    truncated: bool = False

    def add(self, count: int, first: datetime, last: datetime, truncated: bool) -> None:
        self.count += count
        self.first = first if self.first is None else min(self.first, first)
        self.last = last if self.last is None else max(self.last, last)
        self.truncated |= truncated


def _take(
    times: DueTimes,
    lo: datetime | None,
    hi: datetime | None,
    keep: int,
    newest: bool,
    catchup: bool,
    max_scan: int,
    skipped: _Skipped,
) -> list[PlannedRun]:
    """Runs for `keep` fire times of the group [lo, hi] (hi None: empty), the
    newest or the oldest ones; the rest of the group is added to `skipped`."""
    if hi is None or (lo is not None and lo > hi):
        return []
    walk, back = (
        (times.descending, times.ascending) if newest else (times.ascending, times.descending)
    )
    found = list(itertools.islice(walk(lo, hi), keep + 1))
    kept, beyond = found[:keep], found[keep:]
    if beyond:  # at least one is skipped: count them, find the far end
        count, truncated = times.count(lo, hi, max_scan + len(kept))
        first, last = sorted((beyond[0], next(back(lo, hi))))
        skipped.add(count - len(kept), first, last, truncated)
    return [PlannedRun(fire, catchup) for fire in sorted(kept)]


def _catchup_choice(rules: MissedRunRules) -> tuple[int, bool]:
    """Per policy: how many missed fire times inside the window run, and
    whether those are the newest (else the oldest)."""
    match rules.policy:
        case MissedRunPolicy.SKIP:
            return 0, True
        case MissedRunPolicy.RUN_ONCE:
            return 1, rules.pick is CatchupPick.LATEST
        case MissedRunPolicy.RUN_ALL:
            return rules.max_runs, True
    assert_never(rules.policy)


def _groups(
    rules: MissedRunRules, now: datetime, latest: datetime
) -> list[tuple[datetime | None, datetime | None, int, bool, bool]]:
    """The fire times after coalesce_until as groups (lo, hi: inclusive bounds,
    None: unbounded below / an empty group), oldest group first, each with how
    many of its fire times run, whether those are the newest, and whether they
    are catch-up runs. Boundaries: see the module docstring."""
    until = rules.coalesce_until
    if until is not None and until >= now:
        return []  # everything due was coalesced
    rest_from = None if until is None else until + TINY
    # Only the latest due fire time can be on time: an earlier one was
    # overtaken by a newer fire time before any beat dispatched it.
    on_time_from = latest if now - latest <= rules.grace else latest + TINY
    window_from = None if rules.window is None else _before(now, rules.window)
    missed_until = None if on_time_from is None else _before(on_time_from, TINY)
    dropped_until = None if window_from is None else _before(window_from, TINY)
    if missed_until is None or dropped_until is None:
        dropped_until = None  # nothing is missed, or the window has no limit
    else:
        dropped_until = min(dropped_until, missed_until)
    keep, newest = _catchup_choice(rules)
    return [
        (rest_from, dropped_until, 0, True, True),  # missed, outside the window
        (_later_of(rest_from, window_from), missed_until, keep, newest, True),  # missed
        (_later_of(rest_from, on_time_from), now, rules.max_runs, True, False),  # on time
    ]


def _run_once(
    rules: MissedRunRules, caught: list[PlannedRun], on_time: list[PlannedRun], skipped: _Skipped
) -> list[PlannedRun]:
    """run_once is one run for everything due, the on-time latest fire time
    included, whatever the grace (rule 4): after an outage or a re-enable
    the missed fire times and the latest one make ONE run, not a catch-up
    run and an on-time run side by side. `latest` runs the latest fire time
    (a catch-up run standing for the one it replaces); `earliest` runs the
    earliest missed one and skips the latest. Other policies keep both."""
    if rules.policy is not MissedRunPolicy.RUN_ONCE or not caught or not on_time:
        return caught + on_time
    (missed,), (latest,) = caught, on_time
    if rules.pick is CatchupPick.LATEST:
        return [PlannedRun(latest.scheduled_for, True, latest.missed + missed.missed + 1)]
    skipped.add(1, latest.scheduled_for, latest.scheduled_for, False)
    return [missed]


def compute_missed_runs(
    spec: TriggerSpec,
    window: DueWindow,
    *,
    rules: MissedRunRules,
    now: datetime,
    max_scan: int = DEFAULT_MAX_SCAN,
) -> Claim:
    """Decide the runs for the due fire times of `window` under `rules` (see
    the module docstring for the rules and their order). `spec` is the
    trigger's, searched for the fire times at the edges of each group; `rules`
    are assumed valid (`validate_missed_run_rules`); `now` is aware.

    next_run_at is the window's first fire time after now, except that an
    interval anchored on a run's start or finish with no run planned (skipped)
    gets the next time from now: no run will come to set it.
    """
    times = DueTimes(spec, window, now)
    runs: list[PlannedRun] = []
    skipped, truncated = _Skipped(), False
    until = rules.coalesce_until
    if until is not None:
        latest = next(times.descending(None, until), None)
        if latest is not None:
            count, truncated = times.count(None, latest, max_scan + 1)
            late = now - latest > rules.grace
            runs.append(PlannedRun(latest, count > 1 or late, count - 1))
    groups = [
        _take(times, lo, hi, keep, newest, catchup, max_scan, skipped)
        for lo, hi, keep, newest, catchup in _groups(rules, now, window.latest)
    ]
    if groups:
        runs += groups[0] + _run_once(rules, groups[1], groups[2], skipped)
    following = window.following
    if not runs and following is None:
        following = compute_next_without_run(spec, now=now)
    return Claim(
        runs=tuple(runs),
        next_run_at=following,
        skipped_times=min(skipped.count, max_scan),
        skipped_first=skipped.first,
        skipped_last=skipped.last,
        truncated=truncated or skipped.truncated or skipped.count > max_scan,
    )


def compute_next_without_run(spec: TriggerSpec, *, now: datetime) -> datetime | None:
    """The next fire time of an interval anchored on a run's start or finish
    whose claimed fire time gets no run that will start: the missed-run
    policy skipped it, or the beat refused it (maintenance), recorded it
    `skipped` (overlap) or passed it by (condition not met). No run will
    set next_run_at then, so the fire time counts as a run that started
    and ended at `now`: the first fire time after now (now + N, or the
    first instant the trigger's constraints allow after it). None for
    every other trigger: its claim has already set its next_run_at (a
    spent once trigger has none). `now` is aware."""
    if isinstance(spec, IntervalSpec) and spec.anchor in RUN_ANCHORS:
        return compute_next_fire(spec, after=now, now=now)
    return None


# Overlap policies that run the job's runs one after another: under them a
# busy job holds back the due time of an interval anchored on the enqueue.
_ONE_AT_A_TIME = (Overlap.SKIP, Overlap.BUFFER_ONE, Overlap.BUFFER_ALL)


def _after_enqueue(spec: TriggerSpec) -> bool:
    return isinstance(spec, IntervalSpec) and spec.anchor is IntervalAnchor.AFTER_ENQUEUE


def compute_stays_due(spec: TriggerSpec, *, overlap: Overlap, active: int) -> bool:
    """Whether the beat leaves a due trigger unclaimed because its job is
    busy (the migration manual's "busy job"): an interval anchored on the
    enqueue (after_enqueue) of a job whose overlap policy runs one run at a
    time (skip, buffer_one, buffer_all) while it has `active` (running, or
    queued and due) runs. No run is made or skipped and next_run_at keeps
    its value: the due time stays due, and the first claim after the job's
    runs end makes one run for it and sets next_run_at to that claim + N.
    Every other trigger (and policy) is claimed: its run is admitted by the
    overlap policy as usual."""
    return _after_enqueue(spec) and overlap in _ONE_AT_A_TIME and active > 0


def compute_held_until(
    spec: TriggerSpec, *, next_run_at: datetime, busy_until: datetime | None
) -> datetime | None:
    """The moment up to which an after_enqueue trigger's due time was held
    back by its busy job (`compute_stays_due`): `busy_until`, the end of the
    job's latest run that ran, when it ended at or after the due time
    `next_run_at`; else None. The claim passes it as
    MissedRunRules.coalesce_until, as it does a queue's resume (F-28): a
    held due time was not missed by the scheduler, so it is caught up once
    whatever the missed-run policy and window. None for every other trigger."""
    if not _after_enqueue(spec) or busy_until is None or busy_until < next_run_at:
        return None
    return busy_until


def compute_claim(
    spec: TriggerSpec,
    *,
    next_run_at: datetime,
    now: datetime,
    max_scan: int = DEFAULT_MAX_SCAN,
    rules: MissedRunRules | None = None,
) -> Claim:
    """Decide what a beat does with a trigger whose next_run_at has come.

    Precondition: next_run_at <= now (both aware). If it does not hold (say
    another beat moved the trigger first), the claim runs nothing and keeps
    next_run_at. Otherwise the due fire times in [next_run_at, now] are
    decided by `rules` (`compute_missed_runs`). Without rules, as before
    F-24: one run for the latest due fire time; on time it is next_run_at
    itself (catchup False, missed 0); after an outage it is the latest one,
    with `missed` counting the others (at most max_scan) and catchup True.
    The new next_run_at is the first fire time after now (None for a spent
    once trigger, and for intervals anchored on a run's start or finish,
    which the worker sets).

    Raises ValueError for max_scan < 1, TriggerError for invalid rules
    (`validate_missed_run_rules`) or an invalid stored spec.
    """
    if rules is None:
        rules = MissedRunRules(grace=timedelta.max, coalesce_until=now)
    else:
        rules = validate_missed_run_rules(rules)
    if next_run_at > now:
        return Claim(runs=(), next_run_at=next_run_at)
    window = compute_due_window(spec, next_run_at=next_run_at, now=now, max_scan=max_scan)
    return compute_missed_runs(spec, window, rules=rules, now=now, max_scan=max_scan)
