"""Run history (F-50): one row per occurrence of a job, written before it is
published (outbox, F-83) and moved through its life cycle by
compare-and-set in runs.services."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class RunStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    LOST = "lost"


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
FINISHED_STATUSES = tuple(s for s in RunStatus if s not in ACTIVE_STATUSES)


class RunTrigger(models.TextChoices):
    """Why a run exists; the job sees it as `job.trigger` (F-03)."""

    SCHEDULE = "schedule"
    RETRY = "retry"
    MANUAL = "manual"
    API = "api"
    CATCHUP = "catchup"
    FILE = "file"
    DEPENDENCY = "dependency"
    PARENT = "parent"


class WaitingFor(models.TextChoices):
    """What a held run waits for besides its job (F-31, F-34)."""

    NOTHING = "", "its job or the queue"
    GROUP = "group", "a slot of its concurrency group"
    EXCLUSIVE = "exclusive", "every group to be free (exclusive job)"
    LIMIT = "limit", "a slot under TAKT_MAX_CONCURRENCY"


# Runs that stand for a fire time of a trigger: at most one per (job, time).
SCHEDULED_TRIGGERS = (RunTrigger.SCHEDULE, RunTrigger.CATCHUP)


# The one Celery task Takt sends (runs/tasks.py): publishers send it by name.
EXECUTE_RUN_TASK = "takt.execute_run"


def task_id_for(run_id: int) -> str:
    """The Celery task id of a run's message: the same on every re-send, and
    readable in Flower and the broker. Derived from the run id, so it costs
    no column and no unique index."""
    return f"takt-run-{run_id}"


class Run(models.Model):
    # Not indexed alone: the (job, status) and (job, enqueued_at) indexes
    # lead with the job, and every index costs on each status change.
    job = models.ForeignKey(
        "jobs.Job", on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    source_trigger = models.ForeignKey(
        "jobs.Trigger", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    trigger = models.CharField(max_length=16, choices=RunTrigger.choices)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    priority = models.PositiveSmallIntegerField(default=5)
    params = models.JSONField(default=dict, blank=True)
    scheduled_for = models.DateTimeField(
        help_text="The fire time (or requested time) this run stands for."
    )
    enqueued_at = models.DateTimeField()
    published_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField("duration (seconds)", null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(default=1)
    worker = models.CharField(max_length=255, blank=True)
    result_code = models.IntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    message = models.TextField(blank=True)
    output = models.TextField(blank=True)
    missed_count = models.PositiveIntegerField(
        default=0, help_text="Fire times this catch-up run stands in for that did not run."
    )
    dedupe_key = models.CharField(max_length=200, blank=True)
    cancelled_by = models.CharField(
        max_length=200,
        blank=True,
        help_text="Who cancelled the run (a user, a token or a command).",
    )
    # F-93: how far a long run has come, as its job reports it with
    # job.progress(done, total, note): {"done": 40, "total": 100, "note": "..."}.
    progress = models.JSONField(null=True, blank=True)
    # Queued but not sent: it waits for the job's running run, which sends it
    # when it ends (overlap policies buffer_one and buffer_all, F-23).
    held = models.BooleanField(default=False)
    # What a held run waits for (F-31, F-34): "" its job (an overlap policy)
    # or the paused queue; else a slot (WaitingFor).
    waiting_for = models.CharField(max_length=16, choices=WaitingFor.choices, blank=True)
    # The run whose end started this one (trigger `dependency`, F-33) or the
    # parent run it is part of (trigger `parent`, and the retries of those, F-04).
    cause = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="caused",
        db_index=False,
        help_text="The run whose end started it, or the parent run it is part of.",
    )
    retry_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="retries",
        db_index=False,
        help_text="The failed run this one retries.",
    )

    class Meta:
        ordering = ["-enqueued_at", "-id"]
        # runs.cancel.cancel_run through the API (and the admin's action).
        permissions = [("cancel_run", "Can cancel a queued or running run")]
        constraints = [
            # F-100: no path, race or retry creates two runs for one fire time.
            models.UniqueConstraint(
                fields=["job", "scheduled_for"],
                condition=Q(trigger__in=["schedule", "catchup"]),
                name="run_unique_fire_time",
            ),
            # F-33, F-04: a run's end starts a dependent job once, and a
            # parent run runs each child once.
            models.UniqueConstraint(
                fields=["job", "cause"],
                condition=Q(trigger__in=["dependency", "parent"]),
                name="run_unique_cause",
            ),
            # F-43: one run per job and dedupe key (enqueue_job takes the key
            # off an older run whose dedupe window is over).
            models.UniqueConstraint(
                fields=["job", "dedupe_key"],
                condition=~Q(dedupe_key=""),
                name="run_unique_dedupe_key",
            ),
        ]
        indexes = [
            # The run list, newest first (the admin orders by enqueued_at), its
            # date filters and the timeline across jobs.
            models.Index(fields=["-enqueued_at"], name="run_enqueued_idx"),
            # The run list filtered to what is queued or running now, and to
            # what went wrong: small, since a run leaves the first when it
            # ends and enters the second only when it fails.
            models.Index(
                fields=["-enqueued_at"],
                condition=Q(status__in=["queued", "running"]),
                name="run_active_idx",
            ),
            models.Index(
                fields=["-enqueued_at"],
                condition=Q(status__in=["failed", "timed_out", "lost"]),
                name="run_problem_idx",
            ),
            models.Index(fields=["job", "status"], name="run_job_status_idx"),
            models.Index(fields=["job", "-enqueued_at"], name="run_job_recent_idx"),
            # The outbox sweep: queued runs that were never marked published.
            models.Index(
                fields=["enqueued_at"],
                condition=Q(status="queued", published_at__isnull=True),
                name="run_unpublished_idx",
            ),
            # The lost-message sweep (runs/delivery.py): queued runs already
            # sent, oldest message first; empty when every sent run started.
            models.Index(
                fields=["published_at", "id"],
                condition=Q(status="queued", published_at__isnull=False),
                name="run_published_idx",
            ),
            # Deleting a run (retention) finds its retries; without it PostgreSQL
            # scans the table once per deleted row for the foreign key.
            models.Index(
                fields=["retry_of"], condition=Q(retry_of__isnull=False), name="run_retry_of_idx"
            ),
            # The beat's lost-run check (runs.recovery): running runs that
            # started before now - TTL. Holds only what is running now, so
            # an idle check is one probe of an empty index.
            models.Index(
                fields=["started_at"],
                condition=Q(status="running"),
                name="run_running_idx",
            ),
            # A parent run's children, and what a run's end started.
            models.Index(fields=["cause"], condition=Q(cause__isnull=False), name="run_cause_idx"),
            # Runs waiting for their job (buffer policies); the sweep's probe.
            models.Index(
                fields=["job", "enqueued_at"],
                condition=Q(status="queued", held=True),
                name="run_held_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"Run #{self.pk} of job #{self.job_id} ({self.status})"

    @property
    def task_id(self) -> str:
        return task_id_for(self.pk)


class AuditRecord(models.Model):
    """The audit trail of destructive maintenance (F-52, F-72): a row
    announces what is about to be done (one batch of runs to delete) and is
    committed before it is done. No row, no deletion."""

    recorded_at = models.DateTimeField()
    action = models.CharField(max_length=64, help_text='What is done, e.g. "delete runs".')
    count = models.PositiveIntegerField(help_text="How many rows it concerns.")
    first_id = models.BigIntegerField(null=True, blank=True)
    last_id = models.BigIntegerField(null=True, blank=True)
    detail = models.TextField(blank=True, help_text="Which rows, and why.")
    by = models.CharField(max_length=200, help_text="Who: a user, a command or a job's run.")

    class Meta:
        ordering = ["-recorded_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action}: {self.count} at {self.recorded_at:%Y-%m-%d %H:%M:%S} by {self.by}"
