"""Run history across jobs (F-51): read-only, filterable."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from .models import AuditRecord, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "job",
        "trigger",
        "status",
        "scheduled_for",
        "started_at",
        "finished_at",
        "duration",
        "attempt",
        "worker",
    )
    list_filter = ("status", "trigger", "job")
    list_select_related = ("job",)
    search_fields = ("job__name", "message")
    date_hierarchy = "enqueued_at"
    readonly_fields = [f.name for f in Run._meta.fields if f.name != "output"] + ["output_text"]
    exclude = ("output",)

    @admin.display(description="Duration", ordering="duration_s")
    def duration(self, obj: Run) -> str:
        return f"{obj.duration_s:.2f} s" if obj.duration_s is not None else ""

    @admin.display(description="Output")
    def output_text(self, obj: Run) -> str:
        return format_html(
            "<pre style='white-space:pre-wrap'>{}</pre>", obj.output or "(no output)"
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        from .live import live_urls  # F-93: <id>/live/, the run's live JSON

        return [*live_urls(self.admin_site), *super().get_urls()]


@admin.register(AuditRecord)
class AuditRecordAdmin(admin.ModelAdmin):
    """The audit trail of retention cleanup (F-52, F-72): read only."""

    list_display = ("recorded_at", "action", "count", "first_id", "last_id", "by")
    readonly_fields = [f.name for f in AuditRecord._meta.fields]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
