"""The cluster-wide queue switches' row (F-28, F-29): one QueueState,
pk 1, made on first use. The services that change it and mirror it to the
workers are runs/queue.py."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext

from jobs.audit import audited


class QueueState(models.Model):
    """The cluster-wide queue switch (F-28): one row (pk 1), made on first
    use. While paused, no run is enqueued (scheduled ones included) and no
    queued run starts; due times stay due and are caught up once on resume;
    running runs go on. See runs.queue."""

    paused = models.BooleanField(default=False)
    pause_note = models.TextField(blank=True)
    paused_by = models.CharField(max_length=150, blank=True)
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_until = models.DateTimeField(
        null=True, blank=True, help_text=_("Resume by itself at this time. Empty: until resumed.")
    )
    resumed_at = models.DateTimeField(null=True, blank=True)
    # F-29: only jobs allowed during maintenance start; see runs.queue.
    maintenance = models.BooleanField(default=False)
    maintenance_note = models.TextField(blank=True)

    history = audited()

    class Meta:
        verbose_name = _("queue")
        verbose_name_plural = _("queue")

    def __str__(self) -> str:
        return (
            pgettext("queue state", "paused") if self.paused else pgettext("queue state", "running")
        )
