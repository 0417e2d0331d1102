"""The Django admin for jobs: triggers inline with their next fire times
(F-19), run history under the editor (F-51), "Run now" (also on disabled
jobs), enable/disable actions."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Min, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from runs.models import Run, RunTrigger

from . import services
from . import triggers as core
from .errors import TaktError
from .models import Job, Trigger

HISTORY_ROWS = 25
PREVIEW_COUNT = 5


class TriggerInline(admin.StackedInline):
    model = Trigger
    extra = 0
    fields = (
        ("kind", "enabled"),
        ("cron_expression", "timezone"),
        ("interval_seconds", "interval_anchor", "start_at"),
        "run_at",
        ("next_run_at", "upcoming"),
    )
    readonly_fields = ("next_run_at", "upcoming")

    class Media:
        js = ("jobs/trigger_inline.js",)

    @admin.display(description="Next fire times (check schedule)")
    def upcoming(self, obj: Trigger) -> str:
        if obj.pk is None:
            return "Save to see the next fire times."
        try:
            times = core.compute_fire_times(
                services.trigger_spec(obj), after=timezone.now(), count=PREVIEW_COUNT
            )
        except (ValueError, core.TriggerError) as exc:
            return str(exc)
        if not times:
            return "Never fires again."
        return format_html_join("", "{}<br>", ((t.isoformat(timespec="seconds"),) for t in times))


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    inlines = [TriggerInline]
    list_display = ("name", "enabled", "schedule", "next_run", "last_status", "target", "priority")
    list_filter = ("enabled", "kind", "queue")
    search_fields = ("name", "description", "target", "owner")
    actions = ["run_now", "enable", "disable"]
    readonly_fields = ("code_managed", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "description", "enabled", "kind", "target", "params")}),
        (
            "Dispatch",
            {
                "fields": (
                    "priority",
                    "queue",
                    "timeout_s",
                    "timeout_action",
                    "overlap_policy",
                    "missed_run_policy",
                )
            },
        ),
        (
            "Operations",
            {
                "classes": ("collapse",),
                "fields": (
                    "heartbeat_deadline_s",
                    "owner",
                    "notes",
                    "code_managed",
                    "created_at",
                    "updated_at",
                ),
            },
        ),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        return (
            super()
            .get_queryset(request)
            .annotate(_next_run=Min("triggers__next_run_at"))
            .prefetch_related("triggers")
        )

    @admin.display(description="Schedule")
    def schedule(self, obj: Job) -> str:
        return (
            "; ".join(services.trigger_description(t) for t in obj.triggers.all() if t.enabled)
            or "—"
        )

    @admin.display(description="Next run", ordering="_next_run")
    def next_run(self, obj: Job) -> Any:
        return getattr(obj, "_next_run", None) if obj.enabled else None

    @admin.display(description="Last run")
    def last_status(self, obj: Job) -> str:
        last = obj.runs.order_by("-enqueued_at", "-id").values_list("status", flat=True).first()
        return last or "—"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        job = self.get_object(request, object_id)
        extra = {**(extra_context or {}), "run_history": self.run_history(job) if job else ""}
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def run_history(self, obj: Job) -> str:
        """The job's latest runs with their output, shown below the triggers (F-51)."""
        runs = list(obj.runs.order_by("-enqueued_at", "-id")[:HISTORY_ROWS])
        if not runs:
            return "No runs yet."
        rows = format_html_join(
            "",
            "<tr><td><a href='{}'>#{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            "<td><details><summary>{}</summary><pre>{}</pre></details></td></tr>",
            (
                (
                    reverse("admin:runs_run_change", args=[r.pk]),
                    r.pk,
                    r.status,
                    r.trigger,
                    _fmt(r.scheduled_for),
                    _fmt(r.started_at),
                    _fmt(r.finished_at),
                    f"{r.duration_s:.2f} s" if r.duration_s is not None else "",
                    r.message[:80] or "output",
                    r.output,
                )
                for r in runs
            ),
        )
        more = reverse("admin:runs_run_changelist") + f"?job__id__exact={obj.pk}"
        return format_html(
            "<table class='takt-history'><thead><tr><th>Run</th><th>Status</th><th>Trigger</th><th>Scheduled for</th>"
            "<th>Started</th><th>Finished</th><th>Duration</th><th>Message / output</th></tr></thead>"
            "<tbody>{}</tbody></table><p><a href='{}'>All runs of this job</a></p>",
            rows,
            more,
        )

    # --- actions ---------------------------------------------------------------
    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        from runs.services import enqueue_job

        try:
            runs = [enqueue_job(job, trigger=RunTrigger.MANUAL) for job in queryset]
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(
            request,
            f"Started {len(runs)} run(s): " + ", ".join(f"#{r.pk} ({r.status})" for r in runs),
        )

    @admin.action(description="Enable selected jobs")
    def enable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), True)
        self.message_user(request, f"Enabled {n} job(s).")

    @admin.action(description="Disable selected jobs")
    def disable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), False)
        self.message_user(request, f"Disabled {n} job(s).")

    # --- the "Run now" button on the change form --------------------------------
    def get_urls(self) -> list[Any]:
        run_now = self.admin_site.admin_view(require_POST(self.run_now_view))
        return [
            path("<int:job_id>/run-now/", run_now, name="jobs_job_run_now"),
            *super().get_urls(),
        ]

    def run_now_view(self, request: HttpRequest, job_id: int) -> HttpResponse:
        from runs.services import enqueue_job

        job = get_object_or_404(Job, pk=job_id)
        if not self.has_change_permission(request, job):
            return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[job_id]))
        try:
            run = enqueue_job(job, trigger=RunTrigger.MANUAL)
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[job_id]))
        level = messages.SUCCESS if run.status == "queued" else messages.WARNING
        self.message_user(request, f"Run #{run.pk} {run.status}. {run.message}".strip(), level)
        return HttpResponseRedirect(reverse("admin:jobs_job_change", args=[job_id]))


def _fmt(value: Any) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z") if value else ""


__all__ = ["JobAdmin", "Run"]
