"""A job and its triggers as the pure core sees them: the model fields
turned into `TriggerSpec`s (with their weekdays, window and excluded days),
`OverlapRules`, `RetryRules` and `MissedRunRules`, plus the job's
notification settings read leniently. Reads only the instances it is given
(a trigger's excluded calendars are one query, or staged ones); writes
nothing. Validation is jobs/validation.py, writes jobs/services.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone as dj_timezone
from django.utils.translation import gettext

from jobs import registry
from jobs.calendars import calendar_days
from jobs.core import triggers as core
from jobs.core.command import CommandSpec, validate_command
from jobs.core.missed import MissedRunRules
from jobs.core.rules import Overlap, OverlapRules, RetryRules
from jobs.i18n import cron_locale
from jobs.policies import (
    ALL_WEEKDAYS,
    CalendarRuleChoice,
    JobKind,
    TriggerKind,
)

if TYPE_CHECKING:
    from jobs.models import HolidayCalendar, Job, Trigger

SCHEDULE_FIELDS = (
    "kind",
    "cron_expression",
    "timezone",
    "interval_seconds",
    "interval_anchor",
    "start_at",
    "run_at",
    "calendar_rule",
    "at_time",
    "day_of_month",
    "month",
    "weekdays",
    "window_start",
    "window_end",
    "watch_folder",
    "watch_pattern",
    "watch_recursive",
    "settle_seconds",
)


# Years around now whose holidays a trigger skips: the past year (catch-up)
# to 5 years ahead (the pure core looks at most MAX_GAP, ~5 years, ahead).
EXCLUSION_YEARS = (-1, 5)


_RULES_WITH_DAY = (CalendarRuleChoice.DAY_OF_MONTH, CalendarRuleChoice.DATE)


_PENDING = "_pending_calendars"


def trigger_spec(trigger: Trigger, *, now: datetime | None = None) -> core.TriggerSpec:
    """The pure-core view of a trigger. Cron, interval and calendar triggers
    carry Constraints when something restricts them (weekdays other than all
    seven, a window, or excluded days), read in the trigger's time zone (the
    server's by default). Excluded days are those of its calendars in the
    years around `now` (EXCLUSION_YEARS; default: the clock): the staged
    calendars (`stage_exclude_calendars`) if any, else the stored ones; an
    unsaved trigger has none. A once trigger ignores weekdays and calendars.

    Raises ValueError for an unknown kind or a once trigger without run_at,
    ValidationError("weekdays") for a weekday that is not 0..6."""
    zone = trigger.timezone or settings.TIME_ZONE
    if trigger.kind == TriggerKind.DEPENDENCY:
        upstream = trigger.upstream_job if trigger.upstream_job_id is not None else None
        label = f"{upstream.name!r} (#{upstream.pk})" if upstream is not None else "(none)"
        return core.AfterSpec(label, tuple(trigger.upstream_statuses or ("succeeded",)))
    if trigger.kind == TriggerKind.FILE:
        return core.FileSpec(
            trigger.watch_folder,
            trigger.watch_pattern,
            trigger.watch_recursive,
            trigger.settle_seconds,
        )
    if trigger.kind == TriggerKind.ONCE:
        if trigger.run_at is None:
            raise ValueError("a once trigger needs run_at")
        return core.OnceSpec(trigger.run_at)
    constraints = trigger_constraints(trigger, now=now)
    if trigger.kind == TriggerKind.CRON:
        return core.CronSpec(trigger.cron_expression, zone, constraints)
    if trigger.kind == TriggerKind.INTERVAL:
        return core.IntervalSpec(
            timedelta(seconds=trigger.interval_seconds or 0),
            core.IntervalAnchor(trigger.interval_anchor),
            trigger.start_at,
            zone,
            constraints,
        )
    if trigger.kind == TriggerKind.CALENDAR:
        # Day and month left over from another rule (hidden in the admin) are ignored.
        rule = trigger.calendar_rule
        return core.CalendarSpec(
            rule,  # type: ignore[arg-type]  # checked by the pure core
            trigger.at_time,  # type: ignore[arg-type]  # None: "at" is required
            zone,
            trigger.day_of_month if rule in _RULES_WITH_DAY else None,
            trigger.month if rule == CalendarRuleChoice.DATE else None,
            constraints,
        )
    raise ValueError(f"unknown trigger kind {trigger.kind!r}")


def fire_time_key(trigger: Trigger, fire_at: datetime) -> datetime:
    """F-100: the `scheduled_for` of the run that stands for `fire_at` (a
    fire time of `trigger`, aware): the fire time plus the trigger's jitter
    (F-18), a delay of 0..jitter_seconds computed from the trigger's id and
    the fire time, the same in every process. The unique key (job,
    scheduled_for) of schedule and catch-up runs holds this value, so every
    path that makes such a run or asks whether a fire time ran (the beat's
    claim, its `skipped` records, backfill) goes through here: one fire
    time, one key. In UTC."""
    limit = getattr(trigger, "jitter_seconds", 0) or 0
    delay = core.compute_jitter(f"trigger:{trigger.pk}", fire_at, limit) if limit else timedelta(0)
    return (fire_at + delay).astimezone(UTC)


def trigger_weekdays(trigger: Trigger) -> frozenset[int]:
    """The weekdays stored as digits ("01234" = Monday to Friday). Raises
    ValidationError("weekdays") for another character or none at all."""
    for char in trigger.weekdays:
        if char not in ALL_WEEKDAYS:
            raise ValidationError(
                {"weekdays": f"{char!r} is not a weekday: use 0 (Monday) to 6 (Sunday)"}
            )
    if not trigger.weekdays:
        raise ValidationError({"weekdays": "choose at least one weekday"})
    return frozenset(int(char) for char in trigger.weekdays)


def trigger_constraints(
    trigger: Trigger, *, now: datetime | None = None
) -> core.Constraints | None:
    """The trigger's weekdays, window and excluded days; None when they
    restrict nothing. Not checked here (see core.validate_spec)."""
    weekdays = trigger_weekdays(trigger)
    calendars = trigger_calendars(trigger)
    excluded = frozenset[date]()
    if calendars:
        excluded = _days_of(calendars, exclusion_years(now or dj_timezone.now()))
    start, end = trigger.window_start, trigger.window_end
    if len(weekdays) == 7 and start is None and end is None and not excluded:
        return None
    return core.Constraints(weekdays, start, end, excluded)


def trigger_description(trigger: Trigger) -> str:
    try:
        return core.describe(trigger_spec(trigger), gettext, cron_locale=cron_locale())
    except (ValueError, core.TriggerError, ValidationError):
        return gettext("%(kind)s trigger (incomplete)") % {"kind": trigger.kind}


def exclusion_years(now: datetime) -> range:
    """The years whose holidays a trigger skips, around aware `now`."""
    return range(now.year + EXCLUSION_YEARS[0], now.year + EXCLUSION_YEARS[1] + 1)


def stage_exclude_calendars(trigger: Trigger, calendars: Iterable[HolidayCalendar]) -> None:
    """Make validation and the next save see `calendars` as the trigger's
    excluded calendars before the many-to-many rows are written (a form
    saves them after the trigger). If they differ from the stored ones the
    save recomputes next_run_at, as for any schedule edit."""
    setattr(trigger, _PENDING, list(calendars))


def staged_calendars(trigger: Trigger) -> list[HolidayCalendar] | None:
    """The calendars staged by `stage_exclude_calendars` for the trigger's
    next save, or None when none are staged."""
    staged: list[HolidayCalendar] | None = getattr(trigger, _PENDING, None)
    return staged


def trigger_calendars(trigger: Trigger) -> list[HolidayCalendar]:
    """The staged calendars if any; else the stored ones (one query, none
    for a trigger whose `has_exclusions` is unset or that is unsaved)."""
    pending = staged_calendars(trigger)
    if pending is not None:
        return pending
    if trigger.pk is None or not trigger.has_exclusions:
        return []
    return list(trigger.exclude_calendars.all())


def excluded_dates(trigger: Trigger, years: range) -> frozenset[date]:
    """The days of the trigger's excluded calendars in `years` (see
    `trigger_calendars`); empty for a trigger without calendars. Raises
    ValidationError for a calendar stored without validation."""
    return _days_of(trigger_calendars(trigger), years)


def _days_of(calendars: list[HolidayCalendar], years: range) -> frozenset[date]:
    days: set[date] = set()
    for calendar in calendars:
        days.update(calendar_days(calendar, years))
    return frozenset(days)


def overlap_rules(job: Job) -> Any:
    """The job's overlap policy (jobs.core.rules), for the admission decisions
    in runs.core. max_instances counts with `allow` only: any other policy
    runs one at a time, whatever the field says (it is kept for a switch
    back to `allow`)."""
    policy = Overlap(job.overlap_policy)
    slots = job.max_instances if policy is Overlap.ALLOW else 1
    return OverlapRules(policy, slots, job.max_buffered)


def retry_rules(job: Job) -> Any:
    names = tuple(n.strip() for n in job.non_retryable_exceptions.replace(",", "\n").splitlines())
    return RetryRules(
        max_retries=job.max_retries,
        base=timedelta(seconds=job.retry_backoff_s),
        factor=job.retry_backoff_factor,
        max_delay=timedelta(seconds=job.retry_backoff_max_s),
        jitter=job.retry_jitter,
        retry_on_timeout=job.retry_on_timeout,
        non_retryable=tuple(n for n in names if n),
    )


def allowed_in_maintenance(job: Job) -> bool:
    """F-29: whether the job's runs start while maintenance mode is on or
    the queue is paused: its target is on the maintenance allow-list
    (registered with allowed_during_maintenance=True)."""
    return job.kind in (JobKind.CALLABLE, JobKind.SYSTEM) and registry.allowed_in_maintenance(
        job.target
    )


NOTIFY_EVENTS = ("start", "end", "failure", "long_run")


def notify_events(job: Job) -> list[str]:
    """The events the job asks to be told about (Job.notify["on"]); anything
    malformed counts as none (the setting is validated when saved)."""
    notify = getattr(job, "notify", None) or {}
    on = notify.get("on", []) if isinstance(notify, dict) else []
    return [str(event) for event in on] if isinstance(on, list) else []


def long_run_seconds(job: Job) -> float:
    """Job.notify["long_run_s"], or 0 when unset."""
    notify = getattr(job, "notify", None) or {}
    return float(notify.get("long_run_s") or 0) if isinstance(notify, dict) else 0.0


# A fire time claimed at most this late is on time, not missed (F-24).
MISFIRE_GRACE = timedelta(seconds=60)


def missed_run_rules(job: Job, *, coalesce_until: datetime | None = None) -> Any:
    """The job's missed-run policy for jobs.core.missed (F-24, F-102). Fire
    times up to `coalesce_until` (the last queue resume) are caught up once,
    whatever the policy (F-28). Values are checked by the pure core's
    validate_missed_run_rules, which also turns them into its enums."""
    window = job.catchup_window_s
    return MissedRunRules(
        policy=job.missed_run_policy,  # type: ignore[arg-type]
        pick=job.catchup_pick,  # type: ignore[arg-type]
        max_runs=job.catchup_max_runs,
        window=None if window is None else timedelta(seconds=window),
        grace=MISFIRE_GRACE,
        coalesce_until=coalesce_until,
    )


RUN_ANCHORS = core.RUN_ANCHORS  # the anchors whose runs set next_run_at


def command_spec(job: Job, *, is_dir: Callable[[str], bool]) -> CommandSpec:
    """A command job's spec (F-02), checked by the pure core; raises
    TriggerError naming the field. `is_dir`: does a working directory exist
    (os.path.isdir where the job is saved or run)."""
    return validate_command(
        job.command,
        shell=job.shell,
        cwd=job.cwd,
        env=job.env,
        nice=job.nice,
        success_codes=job.success_codes,
        is_dir=is_dir,
    )
