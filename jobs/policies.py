"""Per-job policies as enums: the vocabulary the admin, the API and the pure
core share. Each member's comment says what it does; the default is named on the
model field that uses it. Only implemented members are listed: a member is
added together with the code that honours it."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

ALL_WEEKDAYS = "0123456"  # Trigger.weekdays: 0 = Monday .. 6 = Sunday


# The queue of Takt's runs unless a job names another (Job.queue): its
# workers run `celery worker -Q takt` (runs/publish.py routes a Celery task
# target's runs by the task's own queue while the job keeps this one).
DEFAULT_QUEUE = "takt"


class JobKind(models.TextChoices):
    # A function registered with @takt_job, or a Celery task by name.
    CALLABLE = "callable", _("Python callable")
    # A program run as a subprocess (jobs/core/command.py, runs/commands.py).
    COMMAND = "command", _("Command (a program)")
    # One of Takt's built-in functions with its params (jobs/core/system.py).
    SYSTEM = "system", _("System function (built in)")
    # Python source edited in the admin, run in a subprocess; off unless
    # TAKT_SCRIPTS_ENABLED, superusers only (jobs/core/script.py, runs/scripts.py).
    SCRIPT = "script", _("Script (Python source)")


class OverlapPolicy(models.TextChoices):
    """What a new run does while the job has an active one (F-23); decided by
    runs.core.admission.compute_admission, the same for every source of runs."""

    # Record the new run as `skipped` while another run of the job is active.
    SKIP = "skip", _("Skip (record a skipped run)")
    # Keep one waiting run that starts when the current one ends; more are skipped.
    BUFFER_ONE = "buffer_one", _("Buffer one (one waiting run, no pile-up)")
    # Keep every new run waiting in order, up to max_buffered; more are skipped.
    BUFFER_ALL = "buffer_all", _("Buffer all (up to max_buffered waiting runs)")
    # The new run replaces the active ones: they are cancelled, a running one stopped.
    CANCEL_OTHER = "cancel_other", _("Cancel the other run (the new one replaces it)")
    # Parallel runs, up to max_instances at once; more are skipped.
    ALLOW = "allow", _("Allow parallel runs (up to max_instances)")


class MissedRunPolicy(models.TextChoices):
    """Fire times missed while no beat ran, or while the job was disabled or
    paused (F-24, F-102)."""

    # No catch-up: the missed times are counted and recorded as one skipped run.
    SKIP = "skip", _("Skip missed runs")
    # One catch-up run for the latest (or earliest) missed fire time; the others are counted.
    RUN_ONCE = "run_once", _("Run once to catch up")
    # A run for every missed fire time, at most catchup_max_runs (the latest ones).
    RUN_ALL = "run_all", _("Run every missed time (bounded)")


class CatchupPick(models.TextChoices):
    LATEST = "latest", _("The latest missed time")
    EARLIEST = "earliest", _("The earliest missed time")


class TimeoutAction(models.TextChoices):
    # Stop the run at the limit and record it as `timed_out`.
    STOP = "stop", _("Stop the run (timed_out)")
    # Let it run on with a warning; the job stays locked until it really ends.
    CONTINUE = "continue", _("Keep it running with a warning (the job stays locked)")


class ApiTriggerPermission(models.TextChoices):
    """Who may start the job with `POST /api/v1/jobs/<id>/run` (F-42)."""

    # Nobody: the API refuses to start the job (the admin's "Run now" still works).
    OFF = "off", _("Off")
    # Any authenticated caller: a user (session or user token) or a token for this job.
    AUTHENTICATED = "authenticated", _("Authenticated users and this job's tokens")
    # Only holders of an API token scoped to this job (e.g. another Takt installation).
    TOKEN = "token", _("Only holders of a token for this job")


class TriggerKind(models.TextChoices):
    CRON = "cron", _("Cron expression")
    INTERVAL = "interval", _("Interval")
    ONCE = "once", _("Once")
    # A calendar preset (F-14): see CalendarRuleChoice.
    CALENDAR = "calendar", _("Calendar preset")
    # When a run of another job ends with one of the chosen statuses (F-33).
    DEPENDENCY = "dependency", _("After another job")
    # When a matching file appears or changes in a watched folder (F-16).
    FILE = "file", _("File in a watched folder")


class CalendarRuleChoice(models.TextChoices):
    """The presets of jobs.core.presets.CalendarRule (same values), each at a
    local time of day. Quarters end in March, June, September, December."""

    DAILY = "daily", _("Daily")
    # Monthly on day_of_month; months without that day are skipped.
    DAY_OF_MONTH = "day_of_month", _("Monthly on a day of the month")
    # Yearly on month/day_of_month; 29 February fires in leap years only.
    DATE = "date", _("Yearly on a date")
    MONTH_START = "month_start", _("First day of each month")
    MONTH_END = "month_end", _("Last day of each month")
    QUARTER_START = "quarter_start", _("First day of each quarter")
    QUARTER_END = "quarter_end", _("Last day of each quarter")
    HALF_YEAR_START = "half_year_start", _("First day of each half-year")
    HALF_YEAR_END = "half_year_end", _("Last day of each half-year")
    YEAR_START = "year_start", _("First day of each year")
    YEAR_END = "year_end", _("Last day of each year")


class IntervalAnchorChoice(models.TextChoices):
    """jobs.core.triggers.IntervalAnchor. `from_enqueue`, the grid's name
    before issue 27, is accepted as FIXED_RATE (core.ANCHOR_ALIASES) and
    was renamed in the stored triggers by migration 0022."""

    FIXED_RATE = "fixed_rate", _("On a fixed grid (fixed rate: start + k × N)")
    AFTER_ENQUEUE = "after_enqueue", _("N after the previous run was enqueued (drifts)")
    FROM_START = "from_start", _("From the previous run's start")
    FROM_FINISH = "from_finish", _("Fixed delay after the previous run ends")


# Targets only Takt itself starts: the admin's long operations (the built-in
# "Takt operations" job; its runs act for whoever started them). Not
# offered in the admin, refused through the API, RUN files and bulk runs.
INTERNAL_TARGETS = frozenset({"takt.operation"})
# A parent's target (F-04): it does nothing, the parent's run runs its
# children. A parent is started like any job, from the admin, the API or a
# RUN file (the manual's "request the main task"); starting it needs what
# its children need (jobs.capabilities.needed_to_start).
PARENT_TARGET = "takt.children"
# Targets no job but a built-in one may name: the operations job's (its
# runs act for whoever started them) and Celery's own tasks (celery.*:
# chords, backend cleanup).
RESERVED_TARGETS = frozenset({"takt.operation"})
BUILTIN_KEYS = frozenset({"takt.operations"})


def reserved_target(target: str) -> bool:
    return target in RESERVED_TARGETS or target.startswith("celery.")
