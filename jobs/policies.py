"""Per-job policies as enums: the vocabulary the admin, the API and the pure
core share. Each member's comment says what it does; the default is named on the
model field that uses it. Only implemented members are listed: a member is
added together with the code that honours it."""

from __future__ import annotations

from django.db import models


class JobKind(models.TextChoices):
    # A function registered with @takt_job, or a Celery task by name.
    CALLABLE = "callable", "Python callable"


class OverlapPolicy(models.TextChoices):
    # Record the new run as `skipped` while another run of the job is active.
    SKIP = "skip", "Skip (record a skipped run)"


class MissedRunPolicy(models.TextChoices):
    # One catch-up run for the latest missed fire time; the others are counted.
    RUN_ONCE = "run_once", "Run once to catch up"


class TimeoutAction(models.TextChoices):
    # Stop the run at the limit and record it as `timed_out`.
    STOP = "stop", "Stop the run (timed_out)"


class ApiTriggerPermission(models.TextChoices):
    OFF = "off", "Off"


class TriggerKind(models.TextChoices):
    CRON = "cron", "Cron expression"
    INTERVAL = "interval", "Interval"
    ONCE = "once", "Once"


class IntervalAnchorChoice(models.TextChoices):
    FROM_ENQUEUE = "from_enqueue", "Fixed rate (from the previous fire time)"
    FROM_START = "from_start", "From the previous run's start"
    FROM_FINISH = "from_finish", "Fixed delay after the previous run ends"
