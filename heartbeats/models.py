"""Heartbeats (F-60): one row per job or process, created by its first
report and never before."""

from __future__ import annotations

from django.db import models


class Heartbeat(models.Model):
    """A job's heartbeat goes with its job: a deleted job has nothing left
    to report, and a leftover row would turn overdue for ever (and would
    clash with an outside heartbeat or a later job of the same name)."""

    name = models.CharField(max_length=200)
    job = models.OneToOneField(
        "jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="heartbeat"
    )
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=16, blank=True)
    last_result = models.TextField(blank=True)
    last_run_id = models.BigIntegerField(null=True, blank=True)
    run_count = models.PositiveIntegerField(default=0)
    failure_count = models.PositiveIntegerField(default=0)
    deadline_s = models.PositiveIntegerField("deadline (seconds)", null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # Job heartbeats are keyed by their job; outside processes by name.
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(job__isnull=True),
                name="heartbeat_unique_external_name",
            ),
        ]

    def __str__(self) -> str:
        return self.name
