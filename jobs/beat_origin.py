"""What import_celery_beat (F-76) remembers of a job it made: the
PeriodicTask it came from, the `enabled` it last set (to tell an
operator's change in Takt from its own, jobs.core.beat_reimport), whether
it switched the PeriodicTask off (--disable-source), and the run counts it
read there (django-celery-beat blanks `last_run_at` of a disabled task:
a later import keeps what the first one read). Written only by
jobs.celery_beat."""

from __future__ import annotations

from django.db import models


class BeatOrigin(models.Model):
    """One per job an import of django-celery-beat's PeriodicTasks made or
    updated."""

    job = models.OneToOneField(
        "takt_jobs.Job", on_delete=models.CASCADE, primary_key=True, related_name="beat_origin"
    )
    periodic_task_id = models.PositiveIntegerField()
    # The `enabled` the last import set; None: no import set it (the job
    # was there before, made in Takt or by an import that kept no record).
    enabled_set = models.BooleanField(null=True)
    # The import disabled the PeriodicTask (--disable-source), and it is
    # still disabled: a later import reads it as enabled.
    source_switched = models.BooleanField(default=False)
    last_run_at = models.DateTimeField(null=True)
    total_run_count = models.PositiveIntegerField(default=0)
    imported_at = models.DateTimeField()

    class Meta:
        verbose_name = "django-celery-beat origin"

    def __str__(self) -> str:
        return f"PeriodicTask #{self.periodic_task_id} → job #{self.job_id}"
