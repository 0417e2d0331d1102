"""Job (what runs) and Trigger (when). Thin: rules live in triggers.py,
scheduling.py and services.py."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone as dj_timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from jobs.audit import audited
from jobs.calendars import HolidayCalendar
from jobs.capabilities import PERMISSIONS
from jobs.command_fields import CommandFields
from jobs.core.system import SYSTEM_FUNCTIONS
from jobs.core.triggers import ANCHOR_ALIASES
from jobs.policies import (
    ALL_WEEKDAYS,
    DEFAULT_QUEUE,
    ApiTriggerPermission,
    CalendarRuleChoice,
    CatchupPick,
    IntervalAnchorChoice,
    JobKind,
    MissedRunPolicy,
    OverlapPolicy,
    TimeoutAction,
    TriggerKind,
)
from jobs.specs import trigger_description
from jobs.validation import apply_schedule, schedule_changed, validate_job, validate_trigger


def default_timeout_s() -> int:
    return int(settings.TAKT_DEFAULT_TIMEOUT)


class Job(CommandFields, models.Model):
    """A unit of work and its policies (F-01). Addressed by its id; names need
    not be unique."""

    name = models.CharField(_("name"), max_length=200)
    key = models.CharField(
        _("key"),
        max_length=100,
        null=True,  # NULL, not "", when unset: unique only among the jobs that have one
        blank=True,
        unique=True,
        validators=[
            RegexValidator(
                r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
                _("letters, digits and _ . : - only, starting with a letter or digit"),
            )
        ],
        help_text=_(
            "Optional stable identifier, unique: how exports, imports and jobs declared in code find this job."
        ),
    )
    description = models.TextField(_("description"), blank=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    kind = models.CharField(
        _("kind"), max_length=16, choices=JobKind.choices, default=JobKind.CALLABLE
    )
    target = models.CharField(
        _("target"),
        max_length=255,
        blank=True,
        help_text=format_lazy(
            _(
                "For a callable: the name it was registered under with @takt_job, or a Celery"
                " task name. For a system job: the built-in function ({functions})."
            ),
            functions=", ".join(SYSTEM_FUNCTIONS),
        ),
    )
    params = models.JSONField(
        _("params"), default=dict, blank=True, help_text=_("Keyword arguments (a JSON object).")
    )
    args = models.JSONField(
        _("args"),
        default=list,
        blank=True,
        help_text=_("Positional arguments for a Celery task target (a JSON list)."),
    )
    priority = models.PositiveSmallIntegerField(
        _("priority"),
        default=5,
        validators=[MinValueValidator(0), MaxValueValidator(9)],
        help_text=_("0 runs first, 9 last."),
    )
    queue = models.CharField(_("queue"), max_length=100, default=DEFAULT_QUEUE)
    timeout_s = models.PositiveIntegerField(
        _("timeout (seconds)"),
        default=default_timeout_s,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 86400)],
    )
    timeout_action = models.CharField(
        _("timeout action"),
        max_length=16,
        choices=TimeoutAction.choices,
        default=TimeoutAction.STOP,
    )
    overlap_policy = models.CharField(
        _("overlap policy"),
        max_length=16,
        choices=OverlapPolicy.choices,
        default=OverlapPolicy.SKIP,
    )
    max_instances = models.PositiveSmallIntegerField(
        _("max instances"),
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text=_("Overlap policy 'allow': at most this many runs at once."),
    )
    max_buffered = models.PositiveSmallIntegerField(
        _("max buffered"),
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text=_("Overlap policy 'buffer_all': at most this many waiting runs."),
    )
    missed_run_policy = models.CharField(
        _("missed run policy"),
        max_length=16,
        choices=MissedRunPolicy.choices,
        default=MissedRunPolicy.RUN_ONCE,
    )
    catchup_pick = models.CharField(
        _("catchup pick"),
        max_length=16,
        choices=CatchupPick.choices,
        default=CatchupPick.LATEST,
        help_text=_("Missed-run policy 'run_once': which missed time the catch-up run stands for."),
    )
    catchup_max_runs = models.PositiveSmallIntegerField(
        _("catchup max runs"),
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(1000)],
        help_text=_("Missed-run policy 'run_all': at most this many catch-up runs (the latest)."),
    )
    catchup_window_s = models.PositiveIntegerField(
        _("catch-up window (seconds)"),
        null=True,
        blank=True,
        help_text=_("A fire time missed longer ago than this is skipped. Empty: no limit."),
    )
    max_retries = models.PositiveSmallIntegerField(
        _("max retries"),
        default=0,
        validators=[MaxValueValidator(100)],
        help_text=_("0: no retries."),
    )
    retry_backoff_s = models.PositiveIntegerField(
        _("retry delay (seconds)"),
        default=10,
        validators=[MinValueValidator(1)],
        help_text=_("Delay before the first retry; each next one is `factor` times longer."),
    )
    retry_backoff_factor = models.FloatField(
        _("retry backoff factor"),
        default=2.0,
        validators=[MinValueValidator(1.0)],
        help_text=_("1 = a constant delay."),
    )
    retry_backoff_max_s = models.PositiveIntegerField(
        _("longest retry delay (seconds)"), default=3600
    )
    retry_jitter = models.FloatField(
        _("retry jitter"),
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Each delay is shortened at random by up to this fraction (0 to 1)."),
    )
    retry_on_timeout = models.BooleanField(
        _("retry on timeout"),
        default=False,
        help_text=_("Retry a run that timed out (by default the timeout beats retries)."),
    )
    non_retryable_exceptions = models.TextField(
        _("non retryable exceptions"),
        blank=True,
        help_text=_(
            "Exception class names (or dotted paths), one per line, that are never retried."
        ),
    )
    dropped_retries = models.PositiveIntegerField(
        _("dropped retries"),
        default=0,
        editable=False,
        help_text=_("Retries not made because they would have run into the next fire time."),
    )
    # F-31, F-34: concurrency. A job is in at most one group, or exclusive.
    concurrency_group = models.ForeignKey(
        "ConcurrencyGroup",
        verbose_name=_("concurrency group"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="jobs",
        help_text=_(
            "Jobs in one group run at most the group's limit at a time; a run waits for a slot."
        ),
    )
    exclusive = models.BooleanField(
        _("exclusive (global group)"),
        default=False,
        help_text=_(
            "Starts only while no job of any group runs, and blocks every group while it runs."
        ),
    )
    # F-32: result variables and the condition on one.
    result_variable = models.ForeignKey(
        "ResultVariable",
        verbose_name=_("result variable"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="writers",
        help_text=_(
            "Its runs write their result code here: -1 when one starts, its code when it ends."
        ),
    )
    condition_variable = models.ForeignKey(
        "ResultVariable",
        verbose_name=_("condition variable"),
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="readers",
        help_text=_("Starts only while this variable holds one of the accepted values."),
    )
    condition_values = models.JSONField(
        _("accepted values"),
        default=list,
        blank=True,
        help_text=_("The values that let it start, e.g. [0, 200]."),
    )
    condition_consume = models.BooleanField(
        _("consume the result"),
        default=False,
        help_text=_(
            "Set the variable back to -1 once a run started, so one result starts it once."
        ),
    )
    # F-04: parent and child jobs.
    parent = models.ForeignKey(
        "self",
        verbose_name=_("parent"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text=_(
            "A child runs only as part of its parent's run, in its order; never by itself."
        ),
    )
    child_order = models.PositiveIntegerField(
        _("order among its siblings"),
        default=0,
        help_text=_("Children run in this order (then by id)."),
    )
    stop_on_child_failure = models.BooleanField(
        _("stop on child failure"),
        default=True,
        help_text=_("As a parent: after a failed child, skip the rest (else run them all)."),
    )
    heartbeat_deadline_s = models.PositiveIntegerField(
        _("heartbeat deadline (seconds)"), null=True, blank=True
    )
    notify = models.JSONField(_("notify"), default=dict, blank=True)
    api_trigger_permission = models.CharField(
        _("api trigger permission"),
        max_length=16,
        choices=ApiTriggerPermission.choices,
        default=ApiTriggerPermission.OFF,
    )
    # Least privilege: which run params a caller of the API may set
    # (jobs.validation.check_caller_params, docs/security.md).
    caller_params = models.JSONField(
        _("params a caller may set"),
        default=list,
        blank=True,
        help_text=_(
            'The keys of the run params a caller of the API may set, e.g. ["date", "region"];'
            ' ["*"]: any key. Empty: none, a run gets the job\'s params.'
        ),
    )
    # F-104: a job paused with a note is not scheduled (like a disabled one,
    # a past due time is caught up per its missed-run policy on resume).
    paused = models.BooleanField(_("paused"), default=False)
    pause_note = models.TextField(
        _("pause note"), blank=True, help_text=_("Why, by whom, until when.")
    )
    paused_at = models.DateTimeField(_("paused at"), null=True, blank=True, editable=False)
    paused_by = models.CharField(_("paused by"), max_length=150, blank=True, editable=False)
    paused_until = models.DateTimeField(
        _("paused until"),
        null=True,
        blank=True,
        help_text=_("Resume by itself at this time. Empty: until resumed."),
    )
    pause_after_failures = models.PositiveSmallIntegerField(
        _("pause after failures"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Pause the job after this many failed runs in a row. Empty: never."),
    )
    consecutive_failures = models.PositiveIntegerField(
        _("consecutive failures"), default=0, editable=False
    )
    max_runs = models.PositiveIntegerField(
        _("max runs"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_("Disable the job after this many runs. Empty: no limit."),
    )
    runs_done = models.PositiveIntegerField(_("runs done"), default=0, editable=False)
    owner = models.CharField(_("owner"), max_length=200, blank=True)
    notes = models.TextField(_("notes"), blank=True)
    code_managed = models.BooleanField(
        _("code managed"),
        default=False,
        editable=False,
        help_text=_(
            "Declared in code (TAKT_JOBS or @takt_job(schedule=...)) and synced at start: edit it there."
        ),
    )
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    history = audited(excluded=["runs_done", "consecutive_failures", "updated_at"])

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = ["name", "id"]
        # What is dangerous has a permission of its own (jobs.capabilities).
        permissions = PERMISSIONS
        # The job list pages through jobs in this order (100,000 of them).
        indexes = [models.Index(fields=["name", "id"], name="job_name_idx")]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})" if self.pk else self.name

    def clean(self) -> None:
        validate_job(self)

    def clean_fields(self, exclude: Any = None) -> None:
        if self.key == "":
            self.key = None
        super().clean_fields(exclude=exclude)

    @property
    def timeout(self) -> timedelta:
        return timedelta(seconds=self.timeout_s)

    def save(self, *args: Any, **kwargs: Any) -> None:
        super().save(*args, **kwargs)
        sync_trigger_activity([self.pk])


BEAT_OWNED = frozenset({"next_run_at", "last_fired_at", "missed_count"})
MONTH_CHOICES = list(
    enumerate(
        [
            _("January"),
            _("February"),
            _("March"),
            _("April"),
            _("May"),
            _("June"),
            _("July"),
            _("August"),
            _("September"),
            _("October"),
            _("November"),
            _("December"),
        ],
        start=1,
    )
)


class Trigger(models.Model):
    """When a job runs (F-10..F-15, F-18, F-105). `next_run_at` is the next
    fire time in UTC; `active` mirrors "the job and this trigger are
    enabled", kept by jobs.services so that the beat's claim query reads one
    indexed range and never scans disabled or idle jobs.

    Weekdays, the window and the excluded calendars restrict cron, interval
    and calendar triggers, read in `timezone`. Change `exclude_calendars`
    through jobs.services.set_exclude_calendars (or call
    services.refresh_next_run after changing it): that keeps next_run_at and
    `has_exclusions`, which spares the beat a query per trigger, in step."""

    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, related_name="triggers", verbose_name=_("job")
    )
    kind = models.CharField(
        _("kind"), max_length=16, choices=TriggerKind.choices, default=TriggerKind.CRON
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    cron_expression = models.CharField(
        _("cron expression"),
        max_length=200,
        blank=True,
        help_text=_("5 fields (minute hour day month weekday), or 6 with seconds first."),
    )
    timezone = models.CharField(
        _("timezone"),
        max_length=64,
        blank=True,
        help_text=_("IANA zone, e.g. Europe/Berlin. Default: the server's."),
    )
    interval_seconds = models.PositiveIntegerField(
        _("interval seconds"), null=True, blank=True, help_text=_("1 s to 30 days.")
    )
    interval_anchor = models.CharField(
        _("interval anchor"),
        max_length=16,
        choices=IntervalAnchorChoice.choices,
        default=IntervalAnchorChoice.FIXED_RATE,
        help_text=_(
            "Fixed grid: at start + k × N, a late run does not move it. After the enqueue:"
            " N after the beat enqueued the previous run, so it drifts by how late that was."
        ),
    )
    start_at = models.DateTimeField(
        _("start at"), null=True, blank=True, help_text=_("Interval: first fire time.")
    )
    run_at = models.DateTimeField(
        _("run at"), null=True, blank=True, help_text=_("Once: the date and time to run.")
    )
    # F-14 calendar presets (kind "calendar").
    calendar_rule = models.CharField(
        _("calendar rule"), max_length=16, choices=CalendarRuleChoice.choices, blank=True
    )
    at_time = models.TimeField(
        _("time of day"),
        null=True,
        blank=True,
        help_text=_("Calendar: the local time of day."),
    )
    day_of_month = models.PositiveSmallIntegerField(
        _("day of month"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(31)],
        help_text=_("1 to 31; months without that day are skipped."),
    )
    month = models.PositiveSmallIntegerField(
        _("month"), null=True, blank=True, choices=MONTH_CHOICES
    )
    # F-15: where a cron, interval or calendar trigger may fire, in its time zone.
    weekdays = models.CharField(
        _("weekdays"),
        max_length=7,
        blank=True,  # blank is refused by jobs.services with a clearer message
        default=ALL_WEEKDAYS,
        help_text=_("The days it may fire on (stored as digits, 0 = Monday .. 6 = Sunday)."),
    )
    window_start = models.TimeField(
        _("window start"), null=True, blank=True, help_text=_("Fires only from this local time ...")
    )
    window_end = models.TimeField(
        _("window end"),
        null=True,
        blank=True,
        help_text=_("... until before this one (may cross midnight). Both empty: all day."),
    )
    # F-18: applied by the dispatcher, per fire time (jobs.core.jitter).
    jitter_seconds = models.PositiveIntegerField(
        _("jitter (seconds)"),
        default=0,
        validators=[MaxValueValidator(86_400)],
        help_text=_("Delay each run by a random 0 to N seconds (at most 86400). 0: none."),
    )
    # F-33: kind "dependency": fires when a run of upstream_job ends with one
    # of upstream_statuses (runs/dependencies.py); it has no fire times.
    upstream_job = models.ForeignKey(
        Job,
        verbose_name=_("upstream job"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="downstream_triggers",
        help_text=_("Dependency: the job whose end starts this one."),
    )
    upstream_statuses = models.JSONField(
        _("when it ends"),
        default=list,
        blank=True,
        help_text=_('Dependency: the statuses of its end that start this job, e.g. ["succeeded"].'),
    )
    # F-16: kind "file": a matching file created, changed or renamed into
    # `watch_folder` starts a run (runs/watching.py); no fire times.
    watch_folder = models.CharField(
        _("folder"),
        max_length=500,
        blank=True,
        help_text=_("File: the absolute path of the folder to watch."),
    )
    watch_pattern = models.CharField(
        _("file pattern"),
        max_length=200,
        blank=True,
        default="*",
        help_text=_("File: a glob for the file's name, e.g. *.csv (case-sensitive)."),
    )
    watch_recursive = models.BooleanField(
        _("include subfolders"),
        default=False,
        help_text=_("File: watch the folders below it too."),
    )
    settle_seconds = models.PositiveIntegerField(
        _("settle time (seconds)"),
        default=2,
        validators=[MaxValueValidator(3600)],
        help_text=_(
            "File: start once the file has not changed (no event, same size and"
            " modification time) for this long: a file still being written is waited for."
        ),
    )
    # F-105: days on which it never fires.
    exclude_calendars = models.ManyToManyField(
        "HolidayCalendar",
        verbose_name=_("exclude calendars"),
        blank=True,
        related_name="triggers",
        help_text=_("Skip the days of these holiday calendars."),
    )
    has_exclusions = models.BooleanField(_("has exclusions"), default=False, editable=False)
    next_run_at = models.DateTimeField(_("next run at"), null=True, blank=True, editable=False)
    active = models.BooleanField(_("active"), default=False, editable=False)
    last_fired_at = models.DateTimeField(_("last fired at"), null=True, blank=True, editable=False)
    missed_count = models.PositiveIntegerField(_("missed count"), default=0, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    history = audited(
        excluded=[
            "next_run_at",
            "last_fired_at",
            "missed_count",
            "active",
            "has_exclusions",
            "updated_at",
        ]
    )

    class Meta:
        verbose_name = _("trigger")
        verbose_name_plural = _("triggers")
        ordering = ["id"]
        indexes = [
            # The beat's only hot query: due, active triggers in time order.
            models.Index(fields=["next_run_at"], condition=Q(active=True), name="trigger_due_idx"),
        ]

    def __str__(self) -> str:
        return trigger_description(self)

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any) -> Trigger:
        instance = super().from_db(db, field_names, values)
        # Remember the stored schedule so that a save can tell whether it changed.
        instance._loaded_values = dict(zip(field_names, values, strict=True))
        return instance

    def clean(self) -> None:
        validate_trigger(self, now=dj_timezone.now())

    def _take_anchor_alias(self) -> None:
        # `from_enqueue` is the grid's name before issue 27 (core.ANCHOR_ALIASES).
        self.interval_anchor = ANCHOR_ALIASES.get(self.interval_anchor, self.interval_anchor)

    def clean_fields(self, exclude: Any = None) -> None:
        self._take_anchor_alias()
        super().clean_fields(exclude=exclude)

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Compute next_run_at and `active` from the schedule fields; see
        jobs.validation.apply_schedule. An old anchor name is stored as the
        new one."""
        self._take_anchor_alias()
        if (
            self.pk is not None
            and kwargs.get("update_fields") is None
            and not schedule_changed(self)
        ):
            # Leave the beat-owned fields alone: the beat may have advanced
            # next_run_at since this instance was loaded. has_exclusions
            # changes only with the calendars, which count as a schedule edit.
            kwargs["update_fields"] = [
                f.attname
                for f in self._meta.concrete_fields
                if not f.primary_key and f.attname not in BEAT_OWNED | {"has_exclusions"}
            ]
        apply_schedule(self, now=dj_timezone.now())
        super().save(*args, **kwargs)
        self._loaded_values = {
            f.attname: getattr(self, f.attname) for f in self._meta.concrete_fields
        }


def sync_trigger_activity(job_ids: list[int]) -> None:
    """Set the triggers' `active` flag to "trigger enabled, job enabled, job
    not paused, job not a child"; call after any change of Job.enabled,
    Job.paused or Job.parent (Job.save() does)."""
    # A child (F-04) runs only with its parent: a trigger of its own (which
    # validation refuses) never fires.
    runnable = Exists(
        Job.objects.filter(pk=OuterRef("job_id"), enabled=True, paused=False, parent=None)
    )
    Trigger.objects.filter(job_id__in=job_ids, enabled=True).update(active=runnable)
    Trigger.objects.filter(job_id__in=job_ids, enabled=False).update(active=False)


# Models of this app kept in modules of their own.
from jobs.beat_origin import BeatOrigin  # noqa: E402
from jobs.groups import ConcurrencyGroup  # noqa: E402
from jobs.queue_state import QueueState  # noqa: E402
from jobs.tokens import ApiToken  # noqa: E402
from jobs.variables import ResultVariable  # noqa: E402

__all__ = [
    "ApiToken",
    "BeatOrigin",
    "ConcurrencyGroup",
    "HolidayCalendar",
    "Job",
    "QueueState",
    "ResultVariable",
    "Trigger",
]
