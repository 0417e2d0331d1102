"""Run history (F-50): one row per occurrence of a job, written before it is
published (outbox, F-83) and moved through its life cycle by
compare-and-set in runs.services."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _


class RunStatus(models.TextChoices):
    """A run's status; the labels are the run list's filter choices. The
    badges' lower-case words are runs.labels.status_word."""

    QUEUED = "queued", pgettext_lazy("run status", "Queued")
    RUNNING = "running", pgettext_lazy("run status", "Running")
    SUCCEEDED = "succeeded", pgettext_lazy("run status", "Succeeded")
    FAILED = "failed", pgettext_lazy("run status", "Failed")
    TIMED_OUT = "timed_out", pgettext_lazy("run status", "Timed out")
    SKIPPED = "skipped", pgettext_lazy("run status", "Skipped")
    CANCELLED = "cancelled", pgettext_lazy("run status", "Cancelled")
    LOST = "lost", pgettext_lazy("run status", "Lost")


# The badges' words: lower case as they stand inside a sentence ("it ended
# succeeded"); the filter's choices are RunStatus' labels.
STATUS_WORDS = {
    RunStatus.QUEUED: pgettext_lazy("run status badge", "queued"),
    RunStatus.RUNNING: pgettext_lazy("run status badge", "running"),
    RunStatus.SUCCEEDED: pgettext_lazy("run status badge", "succeeded"),
    RunStatus.FAILED: pgettext_lazy("run status badge", "failed"),
    RunStatus.TIMED_OUT: pgettext_lazy("run status badge", "timed out"),
    RunStatus.SKIPPED: pgettext_lazy("run status badge", "skipped"),
    RunStatus.CANCELLED: pgettext_lazy("run status badge", "cancelled"),
    RunStatus.LOST: pgettext_lazy("run status badge", "lost"),
}


def status_word(status: str) -> str:
    """The lower-case word of a run status in the active language; an
    unknown value with its underscores as spaces."""
    word = STATUS_WORDS.get(status)  # type: ignore[call-overload]
    return str(word) if word is not None else status.replace("_", " ")


ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.RUNNING)
# The ends that went wrong (run_problem_idx; "Re-run failed runs since…").
FAILED_STATUSES = (RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.LOST)
FINISHED_STATUSES = tuple(s for s in RunStatus if s not in ACTIVE_STATUSES)


class RunTrigger(models.TextChoices):
    """Why a run exists; the job sees it as `job.trigger` (F-03)."""

    SCHEDULE = "schedule", pgettext_lazy("run trigger", "Schedule")
    RETRY = "retry", pgettext_lazy("run trigger", "Retry")
    MANUAL = "manual", pgettext_lazy("run trigger", "Manual")
    API = "api", pgettext_lazy("run trigger", "API")
    CATCHUP = "catchup", pgettext_lazy("run trigger", "Catch-up")
    FILE = "file", pgettext_lazy("run trigger", "File")
    DEPENDENCY = "dependency", pgettext_lazy("run trigger", "Dependency")
    PARENT = "parent", pgettext_lazy("run trigger", "Parent")


class WaitingFor(models.TextChoices):
    """What a held run waits for besides its job (F-31, F-34)."""

    NOTHING = "", _("its job or the queue")
    GROUP = "group", _("a slot of its concurrency group")
    EXCLUSIVE = "exclusive", _("every group to be free (exclusive job)")
    LIMIT = "limit", _("a slot under TAKT_MAX_CONCURRENCY")


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
        "takt_jobs.Job",
        on_delete=models.CASCADE,
        related_name="runs",
        db_index=False,
        verbose_name=_("job"),
    )
    source_trigger = models.ForeignKey(
        "takt_jobs.Trigger",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        db_index=False,  # run_source_trigger_idx
        verbose_name=_("source trigger"),
    )
    trigger = models.CharField(_("trigger"), max_length=16, choices=RunTrigger.choices)
    status = models.CharField(
        _("status"), max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED
    )
    priority = models.PositiveSmallIntegerField(_("priority"), default=5)
    params = models.JSONField(_("parameters"), default=dict, blank=True)
    scheduled_for = models.DateTimeField(
        _("scheduled for"),
        help_text=_("The fire time (or requested time) this run stands for."),
    )
    enqueued_at = models.DateTimeField(_("enqueued at"))
    published_at = models.DateTimeField(_("published at"), null=True, blank=True)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    duration_s = models.FloatField(_("duration (seconds)"), null=True, blank=True)
    attempt = models.PositiveSmallIntegerField(_("attempt"), default=1)
    worker = models.CharField(_("worker"), max_length=255, blank=True)
    result_code = models.IntegerField(_("result code"), null=True, blank=True)
    result = models.JSONField(_("result"), null=True, blank=True)
    message = models.TextField(_("message"), blank=True)
    output = models.TextField(_("output"), blank=True)
    missed_count = models.PositiveIntegerField(
        _("missed count"),
        default=0,
        help_text=_("Fire times this catch-up run stands in for that did not run."),
    )
    dedupe_key = models.CharField(_("dedupe key"), max_length=200, blank=True)
    cancelled_by = models.CharField(
        _("cancelled by"),
        max_length=200,
        blank=True,
        help_text=_("Who cancelled the run (a user, a token or a command)."),
    )
    started_by = models.CharField(
        _("started by"),
        max_length=150,
        blank=True,
        editable=False,
        help_text=_(
            "The user who started an operation (a backfill, a bulk Run now, an import):"
            " its rights are checked again when it runs. Set by Takt, never from params."
        ),
    )
    # F-93: how far a long run has come, as its job reports it with
    # job.progress(done, total, note): {"done": 40, "total": 100, "note": "..."}.
    progress = models.JSONField(_("progress"), null=True, blank=True)
    # Queued but not sent: it waits for the job's running run, which sends it
    # when it ends (overlap policies buffer_one and buffer_all, F-23).
    held = models.BooleanField(_("held"), default=False)
    # What a held run waits for (F-31, F-34): "" its job (an overlap policy)
    # or the paused queue; else a slot (WaitingFor).
    waiting_for = models.CharField(
        _("waiting for"), max_length=16, choices=WaitingFor.choices, blank=True
    )
    # The run whose end started this one (trigger `dependency`, F-33) or the
    # parent run it is part of (trigger `parent`, and the retries of those, F-04).
    cause = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="caused",
        db_index=False,
        verbose_name=_("cause"),
        help_text=_("The run whose end started it, or the parent run it is part of."),
    )
    retry_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="retries",
        db_index=False,
        verbose_name=_("retry of"),
        help_text=_("The failed run this one retries."),
    )
    rerun_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reruns",
        db_index=False,  # run_rerun_of_idx
        verbose_name=_("re-run of"),
        help_text=_("The ended run an operator ran again with its parameters."),
    )

    class Meta:
        verbose_name = _("run")
        verbose_name_plural = _("runs")
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
                condition=Q(status__in=FAILED_STATUSES),
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
            # Deleting a run finds its re-runs (as for retries above).
            models.Index(
                fields=["rerun_of"], condition=Q(rerun_of__isnull=False), name="run_rerun_of_idx"
            ),
            # The beat's lost-run check (runs.recovery): running runs that
            # started before now - TTL. Holds only what is running now, so
            # an idle check is one probe of an empty index.
            models.Index(
                fields=["started_at"],
                condition=Q(status="running"),
                name="run_running_idx",
            ),
            # A trigger's runs, newest fire time first: the run an interval
            # anchored on a run waits for (runs/anchored.py), and the
            # foreign key's lookups.
            models.Index(
                fields=["source_trigger", "-scheduled_for"],
                condition=Q(source_trigger__isnull=False),
                name="run_source_trigger_idx",
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
        """As the admin's titles and breadcrumbs show it, in the reader's language."""
        text = gettext("Run #%(id)s of job #%(job)s (%(status)s)")
        return text % {"id": self.pk, "job": self.job_id, "status": status_word(self.status)}

    @property
    def task_id(self) -> str:
        return task_id_for(self.pk)

    @property
    def status_text(self) -> str:
        """Its status in the reader's language, as its badge says it
        (status_word): for templates, ``{{ run.status_text }}``."""
        return status_word(self.status)


class AuditRecord(models.Model):
    """The audit trail of destructive maintenance (F-52, F-72): a row
    announces what is about to be done (one batch of runs to delete) and is
    committed before it is done. No row, no deletion."""

    recorded_at = models.DateTimeField(_("recorded at"))
    action = models.CharField(
        _("action"), max_length=64, help_text=_('What is done, e.g. "delete runs".')
    )
    count = models.PositiveIntegerField(_("count"), help_text=_("How many rows it concerns."))
    first_id = models.BigIntegerField(_("first id"), null=True, blank=True)
    last_id = models.BigIntegerField(_("last id"), null=True, blank=True)
    detail = models.TextField(_("detail"), blank=True, help_text=_("Which rows, and why."))
    by = models.CharField(
        _("by"), max_length=200, help_text=_("Who: a user, a command or a job's run.")
    )

    class Meta:
        verbose_name = _("audit record")
        verbose_name_plural = _("audit records")
        ordering = ["-recorded_at", "-id"]

    def __str__(self) -> str:
        text = gettext("%(action)s: %(count)s at %(at)s by %(by)s")
        at = f"{self.recorded_at:%Y-%m-%d %H:%M:%S}"
        return text % {"action": self.action, "count": self.count, "at": at, "by": self.by}


class SchedulerDecision(models.Model):
    """One entry of the decision log (F-65; runs/decisions.py): written in
    bulk from the Redis stream the engine records into, kept
    TAKT_DECISION_LOG_DAYS. `job_id` 0 is cluster-wide (maintenance, a
    beat's scheduler on or off); ids are plain numbers, not foreign keys:
    the log outlives a deleted job or run."""

    stream_id = models.CharField(_("stream id"), max_length=41, unique=True, editable=False)
    # A context of its own: a bare "at" is the heartbeats' "um" (Django
    # merges every app's catalogue into one).
    at = models.DateTimeField(pgettext_lazy("decision time", "at"))
    kind = models.CharField(_("kind"), max_length=32)
    job_id = models.BigIntegerField(_("job"))
    run_id = models.BigIntegerField(_("run"), null=True, blank=True)
    trigger_id = models.BigIntegerField(_("trigger"), null=True, blank=True)
    detail = models.TextField(_("detail"), blank=True)

    class Meta:
        verbose_name = _("scheduler decision")
        verbose_name_plural = _("scheduler decisions")
        # Newest first is the order recorded: the stream's, kept by the
        # drain's inserts (a decision's `at` is the clock of whoever decided).
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["at"], name="decision_at_idx"),
            models.Index(fields=["job_id", "-id"], name="decision_job_idx"),
            models.Index(fields=["kind", "-id"], name="decision_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"
