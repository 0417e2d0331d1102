"""The Django admin for jobs: triggers inline with their next fire times
(F-19), run history under the editor (F-51), "Run now" (also on disabled
jobs), enable/disable actions."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import Min, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from runs.models import Run, RunTrigger

from . import services
from .calendar_admin import HolidayCalendarAdmin  # noqa: F401  (registers it)
from .definitions import OPERATOR_FIELDS
from .errors import TaktError
from .import_admin import INLINE_RUN_NOW_MAX, import_urls, start_operation_view
from .models import Job
from .trigger_admin import TriggerInline

HISTORY_ROWS = 25


class BackfillForm(forms.Form):
    start = forms.DateTimeField(
        label="From", help_text="Date and time, in the server's time zone (YYYY-MM-DD HH:MM)."
    )
    end = forms.DateTimeField(label="To", help_text="Not in the future.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("start") and data.get("end") and data["end"] < data["start"]:
            self.add_error("end", "must not be before the start")
        return data


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    inlines = [TriggerInline]
    list_display = (
        "name", "enabled", "schedule", "next_run", "last_status", "target", "priority", "code",
    )  # fmt: skip
    list_filter = ("enabled", "kind", "queue", "code_managed")
    search_fields = ("name", "description", "target", "owner")
    actions = ["run_now", "enable", "disable", "pause", "resume", "backfill"]
    readonly_fields = (
        "code_managed",
        "created_at",
        "updated_at",
        "dropped_retries",
        "paused_by",
        "paused_at",
        "consecutive_failures",
        "runs_done",
    )
    fieldsets = (
        (None, {"fields": ("name", "key", "description", "enabled", "kind", "target", "params")}),
        (
            "Dispatch",
            {
                "fields": (
                    ("priority", "queue"),
                    ("api_trigger_permission", "allowed_during_maintenance"),
                    ("timeout_s", "timeout_action"),
                    ("overlap_policy", "max_instances", "max_buffered"),
                    ("missed_run_policy", "catchup_pick", "catchup_max_runs", "catchup_window_s"),
                )
            },
        ),
        (
            "Retries",
            {
                "fields": (
                    ("max_retries", "retry_on_timeout"),
                    ("retry_backoff_s", "retry_backoff_factor", "retry_backoff_max_s"),
                    "retry_jitter",
                    "non_retryable_exceptions",
                    "dropped_retries",
                )
            },
        ),
        (
            "Pause and limits",
            {
                "fields": (
                    ("paused", "paused_until"),
                    "pause_note",
                    ("paused_by", "paused_at"),
                    ("pause_after_failures", "consecutive_failures"),
                    ("max_runs", "runs_done"),
                )
            },
        ),
        (
            "Operations",
            {
                "classes": ("collapse",),
                "fields": (
                    "heartbeat_deadline_s",
                    "notify",
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

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """F-75: a job declared in code is edited there; the operator keeps
        enabled and the pause fields."""
        fields = super().get_readonly_fields(request, obj)
        if obj is None or not obj.code_managed:
            return fields
        shown = flatten_fieldsets(self.get_fieldsets(request, obj))
        return (*fields, *(f for f in shown if f not in OPERATOR_FIELDS and f not in fields))

    @admin.display(description="Code", boolean=True, ordering="code_managed")
    def code(self, obj: Job) -> bool:
        """Declared in code (F-75)."""
        return obj.code_managed

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
        extra = {
            **(extra_context or {}),
            "run_history": self.run_history(job) if job else "",
            "explanation": self.explanation(job) if job else "",
        }
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def explanation(self, job: Job) -> str:
        """F-66: the "why didn't it run?" checklist, as explain_job prints it."""
        from runs.explaining import explain_job

        answer = explain_job(job, now=timezone.now())
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            (("✅" if c.ok else "❌", c.name, c.detail) for c in answer.checks),
        )
        return format_html(
            "<p><strong>{}</strong></p><table class='takt-history'>{}</table>", answer.verdict, rows
        )

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
    def run_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """Up to INLINE_RUN_NOW_MAX jobs at once here; more as a `bulk_run`
        operation (F-93), whose run page shows its progress."""
        from runs.services import enqueue_job

        ids = list(queryset.values_list("pk", flat=True))
        if len(ids) > INLINE_RUN_NOW_MAX:
            return start_operation_view(
                self, request, "bulk_run", {"jobs": ids}, what=f"Run now of {len(ids)} jobs"
            )
        try:
            runs = [enqueue_job(job, trigger=RunTrigger.MANUAL) for job in queryset]
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        self.message_user(
            request,
            f"Started {len(runs)} run(s): " + ", ".join(f"#{r.pk} ({r.status})" for r in runs),
        )
        return None

    @admin.action(description="Enable selected jobs")
    def enable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), True)
        self.message_user(request, f"Enabled {n} job(s).")

    @admin.action(description="Disable selected jobs")
    def disable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), False)
        self.message_user(request, f"Disabled {n} job(s).")

    @admin.action(description="Pause selected jobs")
    def pause(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        by = request.user.get_username()
        n = sum(
            services.pause_job(pk, note=f"paused in the admin by {by}", by=by, now=now)
            for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(request, f"Paused {n} job(s). Edit a job to add a note or an end time.")

    @admin.action(description="Resume selected jobs")
    def resume(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = sum(services.resume_job(pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(request, f"Resumed {n} job(s).")

    @admin.action(description="Backfill a past range…")
    def backfill(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """F-101: runs for every fire time of the selected jobs in a past
        range (runs/backfill.py); asks for the range first, then starts it
        as a `backfill` operation (F-93) and shows its run."""
        form = BackfillForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            ids = list(queryset.values_list("pk", flat=True))
            params = {
                "jobs": ids,
                "start": form.cleaned_data["start"],
                "end": form.cleaned_data["end"],
            }
            started = start_operation_view(
                self, request, "backfill", params, what=f"Backfill of {len(ids)} job(s)", form=form
            )
            if started is not None:
                return started
        context = {
            **self.admin_site.each_context(request),
            "title": "Backfill a past range",
            "opts": self.model._meta,
            "jobs": queryset,
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/jobs/job/backfill.html", context)

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        """A pause ticked in the editor records who and when (F-104)."""
        if "paused" in form.changed_data:
            if obj.paused:
                obj.paused_by, obj.paused_at = request.user.get_username()[:150], timezone.now()
            else:
                obj.paused_until, obj.consecutive_failures = None, 0
        super().save_model(request, obj, form, change)

    # --- the "Run now" button on the change form --------------------------------
    def get_urls(self) -> list[Any]:
        run_now = self.admin_site.admin_view(require_POST(self.run_now_view))
        return [
            path("<int:job_id>/run-now/", run_now, name="jobs_job_run_now"),
            *import_urls(self),
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


__all__ = ["HolidayCalendarAdmin", "JobAdmin", "Run"]
