from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import Heartbeat


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "last_run_at",
        "last_success_at",
        "last_status",
        "run_count",
        "failure_count",
        "deadline_s",
    )
    search_fields = ("name",)
    readonly_fields = [f.name for f in Heartbeat._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Heartbeat | None = None) -> bool:
        return False
