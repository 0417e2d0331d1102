"""The operations page (F-64) and the admin for heartbeats and alerts.

The operations page lists one row per heartbeat: name, last run, last
success, deadline in seconds and the state (`Overdue`, else `Last run
failed`, else `OK`; "No run has reported yet" without a report), with the
times shown in the browser's time zone, and the open alerts with a
mark-as-seen button."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from heartbeats.alert_texts import status_text
from heartbeats.alerts import mark_seen
from heartbeats.models import Alert, Heartbeat
from heartbeats.ping_tokens import NotPingable, issue_ping_token, remove_ping_token
from jobs.admin.display import LocalTimes, state_badge, times_in_text
from jobs.admin.lookups import refuse_regex_lookups

JOB_MANAGED = ("name", "deadline_s")  # a job's heartbeat takes these from its job


@admin.register(Heartbeat)
@refuse_regex_lookups
class HeartbeatAdmin(LocalTimes, admin.ModelAdmin):
    list_display = ("name", "state_now", "last_run_at", "last_success_at", "deadline_s")
    search_fields = ("name",)
    fields = (
        "name",
        "job",
        ("deadline_s", "grace_s"),
        ("paused", "alert_after_failures", "reminder_s"),
        ("last_run_at", "last_success_at", "last_started_at"),
        ("last_status_word", "state"),
        "last_result",
        ("run_count", "failure_count", "consecutive_failures"),
        ("has_ping_token", "ping_notified_at"),
    )
    readonly_fields = (
        "job",
        "has_ping_token",
        "ping_notified_at",
        "last_run_at",
        "last_success_at",
        "last_started_at",
        "last_status_word",
        "state",
        "last_result",
        "run_count",
        "failure_count",
        "consecutive_failures",
    )
    change_list_template = "admin/takt_heartbeats/heartbeat/change_list.html"
    actions = ["new_ping_token", "remove_ping_token"]

    @admin.action(description=_("New ping token"), permissions=["change"])
    def new_ping_token(self, request: HttpRequest, queryset: QuerySet[Heartbeat]) -> None:
        """Issue each outside heartbeat a ping token, shown once here."""
        for beat in queryset.order_by("name"):
            try:
                token = issue_ping_token(beat)
            except NotPingable as exc:
                self.message_user(request, str(exc), messages.WARNING)
                continue
            text = gettext(
                "Ping token of %(name)s (shown only now; the previous one no longer"
                " works): %(token)s — send it as Authorization: Bearer <token>."
            )
            self.message_user(request, text % {"name": beat.name, "token": token}, messages.SUCCESS)

    @admin.action(description=_("Remove ping token"), permissions=["change"])
    def remove_ping_token(self, request: HttpRequest, queryset: QuerySet[Heartbeat]) -> None:
        n = remove_ping_token(list(queryset.values_list("pk", flat=True)))
        text = ngettext(
            "Removed the ping token of %(count)d heartbeat.",
            "Removed the ping tokens of %(count)d heartbeats.",
            n,
        )
        self.message_user(request, text % {"count": n}, messages.SUCCESS)

    @admin.display(description=_("own ping token"), boolean=True)
    def has_ping_token(self, obj: Heartbeat) -> bool:
        return bool(obj.ping_token_hash)

    def get_readonly_fields(self, request: HttpRequest, obj: Heartbeat | None = None) -> Any:
        extra = JOB_MANAGED if obj is not None and obj.job_id else ()
        return (*self.readonly_fields, *extra)

    @admin.display(description=_("state"))
    def state_now(self, obj: Heartbeat) -> SafeString:
        """The one state column: the heartbeat's state now, as every page says it."""
        return state_badge(obj.state_at(now=timezone.now()))

    @admin.display(description=_("last status"))
    def last_status_word(self, obj: Heartbeat) -> str:
        """The last run's status in the reader's language (the code in English)."""
        return status_text(obj.last_status) if obj.last_status else "-"

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view
        return [
            path("operations/", view(self.operations_view), name="takt_heartbeats_operations"),
            path(
                "operations/seen/",
                view(require_POST(self.mark_seen_view)),
                name="takt_heartbeats_alerts_seen",
            ),
            *super().get_urls(),
        ]

    def operations_view(self, request: HttpRequest) -> HttpResponse:
        """Needs `view_heartbeat` and `view_alert`: it lists both."""
        if not request.user.has_perms(
            ["takt_heartbeats.view_heartbeat", "takt_heartbeats.view_alert"]
        ):
            raise PermissionDenied
        now = timezone.now()
        rows = []
        for beat in Heartbeat.objects.order_by("name"):
            rows.append({"heartbeat": beat, "state": beat.state_at(now=now)})
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Operations"),
            "opts": self.model._meta,
            "rows": rows,
            "alerts": Alert.objects.filter(resolved_at__isnull=True).order_by("-last_seen_at")[
                :200
            ],
            "recovered": Alert.objects.filter(resolved_at__isnull=False).order_by("-resolved_at")[
                :20
            ],
        }
        return TemplateResponse(request, "admin/takt_heartbeats/operations.html", context)

    def mark_seen_view(self, request: HttpRequest) -> HttpResponse:
        """Needs `change_alert`, as the alert list's action does."""
        if not request.user.has_perm("takt_heartbeats.change_alert"):
            raise PermissionDenied
        ids = [int(i) for i in request.POST.getlist("alert") if i.isdigit()]
        n = mark_seen(ids)
        self.message_user(request, seen_message(n), messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:takt_heartbeats_operations"))


@admin.register(Alert)
@refuse_regex_lookups
class AlertAdmin(LocalTimes, admin.ModelAdmin):
    list_display = ("title", "severity", "count", "last_seen_at", "seen", "resolved_at")
    list_filter = ("severity", "seen", ("resolved_at", admin.EmptyFieldListFilter))
    search_fields = ("title", "message", "key")
    # The message's UTC times ("last run 2026-06-01T08:00:00+00:00") shown
    # as the admin shows times.
    readonly_fields = [
        f.name if f.name != "message" else "message_text" for f in Alert._meta.fields
    ]
    exclude = ("message",)
    actions = ["mark_as_seen"]

    @admin.display(description=_("message"))
    def message_text(self, obj: Alert) -> SafeString:
        return times_in_text(obj.message)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Mark as seen"), permissions=["change"])
    def mark_as_seen(self, request: HttpRequest, queryset: QuerySet[Alert]) -> None:
        n = mark_seen(list(queryset.values_list("pk", flat=True)))
        self.message_user(request, seen_message(n))


def seen_message(n: int) -> str:
    """The message after alerts were marked seen, in the reader's language."""
    return ngettext("Marked %(count)d alert as seen.", "Marked %(count)d alerts as seen.", n) % {
        "count": n
    }
