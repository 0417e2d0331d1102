"""Heartbeats (F-60, F-106): one row per job or process, created by its
first report and never before; and alerts (F-62): one row per key."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from heartbeats.core.status import STATE_LABELS, HeartbeatState, compute_state

# The labels are the core's marked words (heartbeats.core.status.STATE_LABELS).
STATE_CHOICES = [
    (state.value, capfirst(_(STATE_LABELS[state])))  # type: ignore[arg-type]
    for state in HeartbeatState
]


class Heartbeat(models.Model):
    """A job's heartbeat goes with its job: a deleted job has nothing left
    to report, and a leftover row would turn overdue for ever (and would
    clash with an outside heartbeat or a later job of the same name)."""

    name = models.CharField(_("name"), max_length=200)
    job = models.OneToOneField(
        "takt_jobs.Job",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="heartbeat",
        verbose_name=_("job"),
    )
    last_run_at = models.DateTimeField(_("last run"), null=True, blank=True)
    last_success_at = models.DateTimeField(_("last success"), null=True, blank=True)
    last_started_at = models.DateTimeField(
        _("last start"),
        null=True,
        blank=True,
        help_text=_("When the last reported (or the running) run started."),
    )
    last_status = models.CharField(_("last status"), max_length=16, blank=True)
    last_result = models.TextField(_("last result"), blank=True)
    last_run_id = models.BigIntegerField(_("last run ID"), null=True, blank=True)
    run_count = models.PositiveIntegerField(_("runs"), default=0)
    failure_count = models.PositiveIntegerField(_("failures"), default=0)
    consecutive_failures = models.PositiveIntegerField(_("failures in a row"), default=0)
    deadline_s = models.PositiveIntegerField(_("deadline (seconds)"), null=True, blank=True)
    grace_s = models.PositiveIntegerField(
        _("grace (seconds)"),
        null=True,
        blank=True,
        help_text=_(
            "How long it may be late before it is down; empty: TAKT_HEARTBEAT_GRACE_SECONDS."
        ),
    )
    paused = models.BooleanField(
        _("paused"), default=False, help_text=_("A paused heartbeat raises no alerts.")
    )
    alert_after_failures = models.PositiveIntegerField(
        _("alert after failures"),
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text=_(
            "Alert (critical) only after this many failures in a row; empty: at once (warning)."
        ),
    )
    reminder_s = models.PositiveIntegerField(
        _("reminder (seconds)"),
        null=True,
        blank=True,
        validators=[MinValueValidator(60)],
        help_text=_("Repeat the overdue alert this often while it is down; empty: no reminders."),
    )
    # The state last computed (heartbeats.core.status), kept for change detection:
    # alerts go out when it changes, not on every check.
    state = models.CharField(
        _("state"), max_length=8, choices=STATE_CHOICES, default=HeartbeatState.NEW.value
    )
    last_alerted_at = models.DateTimeField(
        _("last alerted"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the open overdue alert was raised or last reminded; empty: none open."),
    )
    # Pings (issue 25): the SHA-256 of the heartbeat's own ping token (empty:
    # none; TAKT_PING_TOKEN still applies), and when a ping last notified.
    # The database's default too: the run-end upsert (heartbeats.statements)
    # and an older process during an upgrade insert rows without it.
    ping_token_hash = models.CharField(
        _("ping token hash"),
        max_length=64,
        blank=True,
        default="",
        db_default="",
        editable=False,
    )
    ping_notified_at = models.DateTimeField(
        _("last ping notification"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When a ping last sent a notification (TAKT_PING_NOTIFY_INTERVAL_SECONDS)."),
    )
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        verbose_name = _("heartbeat")
        verbose_name_plural = _("heartbeats")
        ordering = ["name"]
        constraints = [
            # Job heartbeats are keyed by their job; outside processes by name.
            models.UniqueConstraint(
                fields=["name"],
                condition=Q(job__isnull=True),
                name="heartbeat_unique_external_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def state_at(self, *, now: datetime) -> HeartbeatState:
        """The state at `now` (aware) from this row, as every admin page shows
        it (the landing page, the job list, the Heartbeats list, the
        operations page): the stored `state` is the last overdue check's
        and may lag by a tick. A start after the last report counts as a
        run under way."""
        started_at, last_run_at = self.last_started_at, self.last_run_at
        return compute_state(
            last_run_at=last_run_at,
            last_started_at=started_at,
            last_status=self.last_status,
            deadline_s=self.deadline_s,
            grace_s=grace_of(self.grace_s),
            paused=self.paused,
            running=started_at is not None and (last_run_at is None or started_at > last_run_at),
            now=now,
        )


def grace_of(grace_s: int | None) -> int:
    """A heartbeat's grace in seconds: its own, else TAKT_HEARTBEAT_GRACE_SECONDS."""
    return settings.TAKT_HEARTBEAT_GRACE_SECONDS if grace_s is None else grace_s


class AlertSeverity(models.TextChoices):
    INFO = "info", _("info")
    WARNING = "warning", _("warning")
    CRITICAL = "critical", _("critical")


# Severities in order: notifications go out at or above a minimum (F-63).
SEVERITY_RANK = {AlertSeverity.INFO: 0, AlertSeverity.WARNING: 1, AlertSeverity.CRITICAL: 2}


class Alert(models.Model):
    """One row per key (F-62): a repeat raises `count` and marks the alert
    unseen again; a recovery sets `resolved_at`. Written only through
    heartbeats.alerts."""

    key = models.CharField(_("key"), max_length=200, unique=True)
    severity = models.CharField(_("severity"), max_length=8, choices=AlertSeverity.choices)
    title = models.CharField(_("title"), max_length=200)
    message = models.TextField(_("message"), blank=True)
    count = models.PositiveIntegerField(_("count"), default=1)
    first_seen_at = models.DateTimeField(_("first seen"))
    last_seen_at = models.DateTimeField(_("last seen"))
    seen = models.BooleanField(_("seen"), default=False)
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    notified_at = models.DateTimeField(
        _("notified"),
        null=True,
        blank=True,
        help_text=_("When a notification about it last went out."),
    )

    class Meta:
        verbose_name = _("alert")
        verbose_name_plural = _("alerts")
        ordering = ["-last_seen_at", "-id"]
        indexes = [
            # The open alerts, newest first (the operations page).
            models.Index(
                fields=["-last_seen_at"],
                condition=Q(resolved_at__isnull=True),
                name="alert_open_idx",
            ),
        ]

    def __str__(self) -> str:
        # The admin's heading: the severity in the reader's language.
        return f"{self.title} ({self.get_severity_display()}, ×{self.count})"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None
